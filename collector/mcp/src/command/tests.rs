//! The command rules, case by case: quoting, every injection shape a shell would honour, every
//! refusal, and how each kind of command is classified.

use super::*;

fn words(line: &str) -> Vec<String> {
    split(line).unwrap_or_else(|e| panic!("{line:?} should split: {e}"))
}

fn refused(line: &str) -> Refusal {
    match check(line) {
        Ok(c) => panic!("{line:?} should be refused, was accepted as {c:?}"),
        Err(e) => e,
    }
}

fn accepted(line: &str) -> Checked {
    check(line).unwrap_or_else(|e| panic!("{line:?} should be accepted: {e}"))
}

#[test]
fn quotes_and_backslashes_make_words_as_a_shell_does() {
    assert_eq!(words("kubectl  get\tpods"), ["kubectl", "get", "pods"]);
    assert_eq!(
        words(r#"kubectl patch svc geo -p '{"spec":{"ports":[{"port":8083}]}}'"#),
        [
            "kubectl",
            "patch",
            "svc",
            "geo",
            "-p",
            r#"{"spec":{"ports":[{"port":8083}]}}"#
        ]
    );
    assert_eq!(
        words(r#"kubectl annotate pod p note="a b \"c\" \$d \x""#),
        ["kubectl", "annotate", "pod", "p", r#"note=a b "c" $d \x"#]
    );
    assert_eq!(
        words(r"kubectl get pod a\ b"),
        ["kubectl", "get", "pod", "a b"]
    );
    assert_eq!(words("kubectl get ''"), ["kubectl", "get", ""]);
    assert_eq!(words("kubectl get po'd'\"s\""), ["kubectl", "get", "pods"]);
    assert_eq!(words("  "), Vec::<String>::new());
}

#[test]
fn shell_metacharacters_inside_quotes_are_plain_text() {
    let c =
        accepted(r#"kubectl get pods -o jsonpath='{.items[*].metadata.name} | ; && > $(x) `y`'"#);
    assert_eq!(
        c.args.last().map(String::as_str),
        Some("jsonpath={.items[*].metadata.name} | ; && > $(x) `y`")
    );
    let c = accepted(r#"kubectl label pod p "note=a|b;c>d&e""#);
    assert_eq!(c.args.last().map(String::as_str), Some("note=a|b;c>d&e"));
    // A `$` that starts no expansion is literal, as in a shell.
    assert_eq!(
        words("kubectl get cm $ a$"),
        ["kubectl", "get", "cm", "$", "a$"]
    );
}

#[test]
fn every_shell_operator_is_refused_and_named() {
    let cases = [
        ("kubectl get pods | grep geo", "a pipe", "|"),
        ("kubectl get pods|grep geo", "a pipe", "|"),
        ("kubectl get pods > /tmp/x", "a redirect", ">"),
        ("kubectl get pods >> /tmp/x", "a redirect", ">>"),
        ("kubectl get pods >| /tmp/x", "a redirect", ">|"),
        ("kubectl get pods &> /tmp/x", "a redirect", "&>"),
        ("kubectl apply -f - < /etc/passwd", "a redirect", "<"),
        ("kubectl get pods <<EOF", "a redirect", "<<"),
        ("kubectl get pods; rm -rf /", "a command separator", ";"),
        ("kubectl get pods\nrm -rf /", "a command separator", "\\n"),
        ("kubectl get pods && rm -rf /", "command chaining", "&&"),
        ("kubectl get pods || rm -rf /", "command chaining", "||"),
        (
            "kubectl get pods &",
            "a background job or command chaining",
            "&",
        ),
        ("kubectl get `rm -rf /`", "command substitution", "`"),
        ("kubectl get \"`id`\"", "command substitution", "`"),
        ("kubectl get $(id)", "command substitution", "$("),
        ("kubectl get \"$(id)\"", "command substitution", "$("),
        ("kubectl get ${HOME}", "variable expansion", "${"),
        ("kubectl get $HOME", "variable expansion", "$H"),
        ("kubectl get \"$HOME\"", "variable expansion", "$H"),
        ("kubectl get $1", "variable expansion", "$1"),
        ("kubectl get (pods)", "a subshell", "("),
        ("kubectl get pods # all of them", "a comment", "#"),
    ];
    for (line, what, token) in cases {
        match refused(line) {
            Refusal::ShellSyntax { what: w, token: t } => {
                assert_eq!((w, t.as_str()), (what, token), "{line:?}");
            }
            other => panic!("{line:?}: expected shell syntax, got {other:?}"),
        }
    }
    // The message tells the agent what to do instead.
    let msg = refused("kubectl get pods | grep geo").to_string();
    assert!(
        msg.contains("a pipe") && msg.contains("--field-selector"),
        "{msg}"
    );
}

#[test]
fn unterminated_quotes_and_backslashes_are_refused() {
    assert_eq!(
        refused("kubectl get 'pods"),
        Refusal::UnclosedQuote("single")
    );
    assert_eq!(
        refused("kubectl get \"pods"),
        Refusal::UnclosedQuote("double")
    );
    assert_eq!(refused("kubectl get pods\\"), Refusal::TrailingBackslash);
}

#[test]
fn only_kubectl_runs() {
    assert_eq!(refused(""), Refusal::Empty);
    assert_eq!(refused("   "), Refusal::Empty);
    assert_eq!(refused("rm -rf /"), Refusal::NotKubectl("rm".into()));
    assert_eq!(
        refused("/usr/bin/kubectl get pods"),
        Refusal::NotKubectl("/usr/bin/kubectl".into())
    );
    assert_eq!(refused("kubectl"), Refusal::NoSubcommand);
    assert_eq!(refused("kubectl -n default"), Refusal::NoSubcommand);
    assert!(matches!(refused("kubectl plugin list"), Refusal::Unknown(v) if v == "plugin"));
    assert!(
        matches!(refused("kubectl certificate approve x"), Refusal::Unknown(v) if v == "certificate")
    );
    assert!(matches!(refused("kubectl rollout"), Refusal::Unknown(v) if v == "rollout"));
    assert!(
        matches!(refused("kubectl rollout sideways d/x"), Refusal::Unknown(v) if v == "rollout sideways")
    );
}

#[test]
fn unsupported_subcommands_are_refused_with_the_reason() {
    for (line, verb) in [
        ("kubectl debug pod/x -it --image=busybox", "debug"),
        ("kubectl edit deploy geo", "edit"),
        ("kubectl wait --for=condition=Ready pod/x", "wait"),
        ("kubectl proxy", "proxy"),
        ("kubectl port-forward svc/geo 8083", "port-forward"),
        ("kubectl cp x:/etc/passwd /tmp/p", "cp"),
        ("kubectl attach x", "attach"),
        ("kubectl logs -f geo-1", "logs -f"),
        (
            "kubectl -n hotel-reservation logs geo-1 --follow",
            "logs -f",
        ),
        ("kubectl logs geo-1 --follow=true", "logs -f"),
        ("kubectl get pods -w", "get -w"),
        ("kubectl get pods --watch-only", "get -w"),
        ("kubectl exec -it geo-1 -- sh", "exec -it"),
        ("kubectl exec geo-1 -i -- sh", "exec -it"),
        ("kubectl run x --image=busybox -it", "run -i"),
        ("kubectl run x --image=busybox --rm", "run -i"),
        ("kubectl config use-context other", "config use-context"),
        (
            "kubectl config set-context x --namespace=y",
            "config set-context",
        ),
    ] {
        match refused(line) {
            Refusal::Unsupported(v, why) => {
                assert_eq!(v, verb, "{line:?}");
                assert!(!why.is_empty());
            }
            other => panic!("{line:?}: expected unsupported, got {other:?}"),
        }
    }
    // Following is fine once it is turned off.
    assert_eq!(
        accepted("kubectl logs geo-1 --follow=false").effect,
        Effect::Read
    );
}

#[test]
fn flags_that_leave_the_session_cluster_are_refused() {
    for (line, flag) in [
        (
            "kubectl --kubeconfig /root/.kube/config get pods",
            "--kubeconfig",
        ),
        (
            "kubectl get pods --kubeconfig=/root/.kube/config",
            "--kubeconfig",
        ),
        ("kubectl get pods --server https://10.0.0.1", "--server"),
        ("kubectl get pods -s https://10.0.0.1", "-s"),
        ("kubectl get pods -s=https://10.0.0.1", "-s"),
        ("kubectl --context prod delete ns default", "--context"),
        ("kubectl get secrets --as system:admin", "--as"),
        ("kubectl get pods --token=abc", "--token"),
        (
            "kubectl get pods --insecure-skip-tls-verify",
            "--insecure-skip-tls-verify",
        ),
    ] {
        assert_eq!(
            refused(line),
            Refusal::ConnectionFlag(flag.into()),
            "{line:?}"
        );
    }
}

#[test]
fn reads_are_classified_as_reads() {
    for line in [
        "kubectl get pods -n hotel-reservation",
        "kubectl -n hotel-reservation describe svc geo",
        "kubectl logs geo-1 --tail=50 -p",
        "kubectl top pods",
        "kubectl explain deployment.spec",
        "kubectl events -A",
        "kubectl api-resources",
        "kubectl version",
        "kubectl rollout status deploy/geo",
        "kubectl rollout history deploy geo",
        "kubectl auth can-i delete pods",
        "kubectl config view",
        "kubectl diff -f x.yaml",
        "kubectl get --help",
    ] {
        let c = accepted(line);
        assert_eq!(
            (c.effect, c.targets),
            (Effect::Read, Targets::None),
            "{line:?}"
        );
    }
}

#[test]
fn writes_are_classified_with_how_to_find_their_targets() {
    for (line, verb, effect, targets) in [
        (
            r#"kubectl patch svc geo -p '{"spec":{}}'"#,
            "patch",
            Effect::DryRunnable,
            Targets::DryRunJson,
        ),
        (
            "kubectl apply -f x.yaml",
            "apply",
            Effect::DryRunnable,
            Targets::DryRunJson,
        ),
        (
            "kubectl scale deploy geo --replicas=2",
            "scale",
            Effect::DryRunnable,
            Targets::ResourceArgs,
        ),
        (
            "kubectl set env deploy/geo A=1",
            "set",
            Effect::DryRunnable,
            Targets::DryRunJson,
        ),
        (
            "kubectl rollout undo deploy/geo",
            "rollout undo",
            Effect::DryRunnable,
            Targets::DryRunJson,
        ),
        (
            "kubectl delete pod geo-1",
            "delete",
            Effect::DryRunnable,
            Targets::DryRunNames,
        ),
        (
            "kubectl cordon node-1",
            "cordon",
            Effect::DryRunnable,
            Targets::Nodes,
        ),
        (
            "kubectl rollout restart deploy/geo",
            "rollout restart",
            Effect::NoDryRun,
            Targets::ResourceArgs,
        ),
        (
            "kubectl exec geo-1 -- ls",
            "exec",
            Effect::NoDryRun,
            Targets::None,
        ),
    ] {
        let c = accepted(line);
        assert_eq!(
            (c.verb.as_str(), c.effect, c.targets),
            (verb, effect, targets),
            "{line:?}"
        );
    }
}

#[test]
fn a_write_the_caller_already_dry_runs_is_a_read() {
    for line in [
        "kubectl delete pod geo-1 --dry-run=server",
        "kubectl delete pod geo-1 --dry-run=client",
        "kubectl delete pod geo-1 --dry-run",
        "kubectl scale deploy geo --replicas=0 -h",
    ] {
        assert_eq!(accepted(line).effect, Effect::Read, "{line:?}");
    }
    assert_eq!(
        accepted("kubectl delete pod geo-1 --dry-run=none").effect,
        Effect::DryRunnable
    );
}

#[test]
fn namespace_and_positionals_are_found_whatever_the_flag_spelling() {
    for line in [
        "kubectl -n hotel scale deploy geo --replicas=2",
        "kubectl scale --namespace hotel deploy geo --replicas 2",
        "kubectl scale --namespace=hotel deploy geo --replicas=2",
        "kubectl scale -nhotel deploy geo --replicas=2",
        "kubectl scale -n=hotel deploy -o json geo --replicas=2",
    ] {
        let c = accepted(line);
        assert_eq!(c.namespace.as_deref(), Some("hotel"), "{line:?}");
        assert_eq!(c.positionals, ["deploy", "geo"], "{line:?}");
        assert_eq!(c.namespace_args(), ["-n", "hotel"]);
    }
    let c = accepted("kubectl delete pods -lapp=geo -A");
    assert!(c.all_namespaces);
    assert_eq!(c.positionals, ["pods"]);
    let c = accepted("kubectl exec geo-1 -c hotel -- ls -l /");
    assert_eq!(c.positionals, ["geo-1", "ls", "-l", "/"]);
    assert!(accepted("kubectl get pods").namespace_args().is_empty());
}

#[test]
fn the_dry_run_asks_for_the_output_the_rollback_reads() {
    let c = accepted("kubectl -n hotel patch svc geo -p '{}' -o yaml");
    assert_eq!(
        c.dry_run_args(),
        [
            "-n",
            "hotel",
            "patch",
            "svc",
            "geo",
            "-p",
            "{}",
            "-o",
            "yaml",
            "--dry-run=server",
            "-o",
            "json"
        ]
    );
    assert_eq!(
        accepted("kubectl delete pod a b").dry_run_args(),
        ["delete", "pod", "a", "b", "--dry-run=server", "-o", "name"]
    );
    assert_eq!(
        accepted("kubectl cordon n1").dry_run_args(),
        ["cordon", "n1", "--dry-run=server"]
    );
    assert_eq!(accepted("kubectl get pods").to_string(), "kubectl get pods");
}

#[test]
fn node_commands_name_their_nodes() {
    assert_eq!(
        accepted("kubectl cordon n1 node/n2").node_names(),
        ["n1", "n2"]
    );
    assert_eq!(
        accepted("kubectl drain n1 --ignore-daemonsets --delete-emptydir-data").node_names(),
        ["n1"]
    );
    assert_eq!(
        accepted("kubectl taint nodes n1 dedicated=x:NoSchedule").node_names(),
        ["n1"]
    );
    assert!(
        accepted("kubectl taint nodes -l a=b k=v:NoSchedule")
            .node_names()
            .is_empty()
    );
    assert!(
        accepted("kubectl taint pods p k=v:NoSchedule")
            .node_names()
            .is_empty()
    );
}
