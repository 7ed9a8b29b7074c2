#!/usr/bin/env python3
"""Writes schema.txt, the message table the protobuf body decoder walks.

Usage: gen_schema.py API_GIT_DIR APIMACHINERY_GIT_DIR > schema.txt

Reads, from git checkouts of k8s.io/api and k8s.io/apimachinery (bare git directories are fine:
files are read with `git show HEAD:path`), two things per API package:
- generated.proto: each message's field numbers, names and wire types;
- the Go types (*.go): each field's JSON name and whether Go's encoding/json would omit it when
  zero (omitempty, omitzero), whether it is a pointer (a pointer's zero value is still sent) and
  whether an embedded struct is inlined into its parent's JSON object.
The proto alone cannot say what JSON the object would have had: kubectl's Go structs write every
non-pointer scalar on the protobuf wire, zero or not, and only the Go field tells whether the
zero belongs in the JSON.

Output, one message per block:
    message <full.proto.Name>
    list <full.proto.Name>            (a Go named slice, e.g. ExtraValue: JSON is the items array)
    <number> <jsonName> <opt|rep|map> <type> <flags>
where type is a proto scalar or a full message name (for map: the value type; keys are strings)
and flags is a comma list of ptr, omitempty, omitzero, inline, or '-'.
"""
import re
import subprocess
import sys

# (repository index, directory, proto package) for every package a request body may use.
PACKAGES = [
    (1, "pkg/apis/meta/v1", "k8s.io.apimachinery.pkg.apis.meta.v1"),
    (1, "pkg/api/resource", "k8s.io.apimachinery.pkg.api.resource"),
    (1, "pkg/runtime", "k8s.io.apimachinery.pkg.runtime"),
    (1, "pkg/runtime/schema", "k8s.io.apimachinery.pkg.runtime.schema"),
    (1, "pkg/util/intstr", "k8s.io.apimachinery.pkg.util.intstr"),
] + [
    (0, d, "k8s.io.api." + d.replace("/", "."))
    for d in [
        "core/v1", "apps/v1", "batch/v1", "autoscaling/v1", "autoscaling/v2", "policy/v1",
        "rbac/v1", "scheduling/v1", "networking/v1", "authorization/v1", "authentication/v1",
        "certificates/v1", "coordination/v1", "discovery/v1", "events/v1", "storage/v1",
    ]
]

SCALARS = {"string", "bytes", "bool", "int32", "int64", "uint32", "uint64", "sint32",
           "sint64", "fixed32", "fixed64", "sfixed32", "sfixed64", "double", "float"}


def git(repo, *args):
    return subprocess.run(["git", "--git-dir", repo, *args], check=True,
                          capture_output=True, text=True).stdout


def parse_proto(text, package):
    """{message name: [(number, proto name, card, type)]} in file order."""
    text = re.sub(r"//[^\n]*", "", text)
    messages, current = {}, None
    for line in text.splitlines():
        line = line.strip()
        m = re.match(r"message (\w+) \{", line)
        if m:
            current = messages.setdefault(m.group(1), [])
            continue
        if line == "}":
            current = None
            continue
        m = re.match(r"(optional|repeated) ([\w.]+) (\w+) = (\d+);", line)
        if m and current is not None:
            card = "opt" if m.group(1) == "optional" else "rep"
            current.append((int(m.group(4)), m.group(3), card, qualify(m.group(2), package)))
            continue
        m = re.match(r"map<(\w+), ([\w.]+)> (\w+) = (\d+);", line)
        if m and current is not None:
            assert m.group(1) == "string", line
            current.append((int(m.group(4)), m.group(3), "map", qualify(m.group(2), package)))
            continue
        assert current is None or not line, f"unparsed proto line in {package}: {line}"
    return messages


def qualify(t, package):
    if t in SCALARS:
        return t
    return t[1:] if t.startswith(".") else f"{package}.{t}"


FIELD = re.compile(r"^\s*(\w+\s+)?(\S+)\s+`([^`]*)`")


def parse_go(text):
    """({struct: {number: (json name, flags)}}, {named slice types})."""
    structs, slices, current = {}, set(), None
    for line in text.splitlines():
        m = re.match(r"^type (\w+) struct \{", line)
        if m:
            current = structs.setdefault(m.group(1), {})
            continue
        m = re.match(r"^type (\w+) \[\]\w+\s*$", line)
        if m:
            slices.add(m.group(1))
        if line.startswith("}"):
            current = None
            continue
        m = FIELD.match(line)
        if not m or current is None:
            continue
        tags = dict(re.findall(r'(\w+):"([^"]*)"', m.group(3)))
        if len(tags.get("protobuf", "").split(",")) < 2:
            continue
        number = int(tags["protobuf"].split(",")[1])
        json_parts = tags.get("json", "").split(",")
        flags = [f for f in ("omitempty", "omitzero") if f in json_parts[1:]]
        if m.group(2).startswith("*"):
            flags.insert(0, "ptr")
        name = json_parts[0]
        if m.group(1) is None and name == "":
            flags.append("inline")
        current[number] = (name, flags)
    return structs, slices


def main():
    repos = sys.argv[1:3]
    heads = [git(r, "rev-parse", "HEAD").strip() for r in repos]
    print(f"# Generated by gen_schema.py from k8s.io/api {heads[0]} and k8s.io/apimachinery {heads[1]}.")
    for repo_index, directory, package in PACKAGES:
        repo = repos[repo_index]
        messages = parse_proto(git(repo, "show", f"HEAD:{directory}/generated.proto"), package)
        structs, slices = {}, set()
        for path in git(repo, "ls-tree", "--name-only", "HEAD", directory + "/").split():
            base = path.rsplit("/", 1)[-1]
            if not base.endswith(".go") or base.endswith("_test.go") or "generated" in base:
                continue
            s, sl = parse_go(git(repo, "show", f"HEAD:{path}"))
            structs.update(s)
            slices |= sl
        for name, fields in messages.items():
            full = f"{package}.{name}"
            print(("list " if name in slices else "message ") + full)
            go = structs.get(name, {})
            if not go and name not in slices:
                print(f"note: no Go struct for {full}", file=sys.stderr)
            # Go struct order is the JSON order; fields unknown to Go keep proto order at the end.
            order = list(go) + [f[0] for f in fields if f[0] not in go]
            by_number = {f[0]: f for f in fields}
            for number in order:
                if number not in by_number:
                    continue
                _, proto_name, card, typ = by_number[number]
                json_name, flags = go.get(number, (proto_name, ["ptr", "omitempty"]))
                if json_name == "-":
                    continue
                if "inline" in flags or not json_name:
                    # Untagged Go fields only occur in types with their own JSON form (IntOrString).
                    json_name = proto_name
                print(f"{number} {json_name} {card} {typ} {','.join(flags) or '-'}")


main()
