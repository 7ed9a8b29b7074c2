//! `netrelay ADDR=SOCKET... -- PROGRAM ARGS...`: the relay inside an agent's sandbox (see
//! `session::sandbox`). It knows nothing but the addresses and sockets it is given.

fn main() -> std::process::ExitCode {
    session::sandbox::relay::main(std::env::args().skip(1).collect())
}
