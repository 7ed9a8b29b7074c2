"""Network client the eBPF injection tests run inside (and outside) a faulted cgroup.

Prints one JSON object with what happened; every error is counted by its errno name.

  netclient.py connect HOST PORT N        TCP connects
  netclient.py udp HOST PORT N            UDP sendto (no answer awaited)
  netclient.py echo HOST PORT N           UDP echo round trips, sent in batches of 100
  netclient.py read PATH                  read a file
"""
import errno
import json
import socket
import sys
import time


def name(err):
    return errno.errorcode.get(err.errno, str(err.errno))


def count(errors, err):
    key = name(err)
    errors[key] = errors.get(key, 0) + 1


def connect(host, port, n):
    ok, errors = 0, {}
    for _ in range(n):
        s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
        try:
            s.connect((host, port))
            ok += 1
        except OSError as err:
            count(errors, err)
        finally:
            s.close()
    return {"ok": ok, "errors": errors}


def udp(host, port, n):
    ok, errors = 0, {}
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    for _ in range(n):
        try:
            s.sendto(b"q", (host, port))
            ok += 1
        except OSError as err:
            count(errors, err)
    return {"ok": ok, "errors": errors}


def echo(host, port, n):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    # Room for a whole batch of answers: loss must come from the fault, not a full buffer.
    s.setsockopt(socket.SOL_SOCKET, 33, 4 << 20)  # SO_RCVBUFFORCE
    s.connect((host, port))
    sent, received, errors, seen = 0, 0, {}, set()
    batch = 100
    for start in range(0, n, batch):
        want = set()
        for i in range(start, min(start + batch, n)):
            try:
                s.send(i.to_bytes(4, "big"))
                sent += 1
                want.add(i)
            except OSError as err:
                count(errors, err)
        # Answers come back within microseconds on loopback; 200 ms of quiet ends the batch.
        s.settimeout(0.2)
        while want:
            try:
                data = s.recv(64)
            except socket.timeout:
                break
            i = int.from_bytes(data[:4], "big")
            if i in want and i not in seen:
                want.discard(i)
                seen.add(i)
                received += 1
        s.settimeout(None)
    return {"sent": sent, "received": received, "errors": errors}


def read(path):
    try:
        with open(path, "rb") as f:
            return {"ok": len(f.read()), "errors": {}}
    except OSError as err:
        return {"ok": 0, "errors": {name(err): 1}}


def main():
    mode = sys.argv[1]
    if mode == "read":
        result = read(sys.argv[2])
    else:
        host, port, n = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
        result = {"connect": connect, "udp": udp, "echo": echo}[mode](host, port, n)
    result["finished_at"] = time.time()
    print(json.dumps(result))


main()
