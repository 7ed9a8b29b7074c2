//! The database CLIs the apps' images ship, talking to the database's state in the model:
//! `mongo` (the 4.4 shell: `--eval` with the user-management and health commands an operator
//! runs), `redis-cli`/`valkey-cli` and `psql`. Authentication follows the database's state: a
//! revoked role or a dropped user is visible in `db.getUsers()` and mended by
//! `db.grantRolesToUser` / `db.createUser`, run by a user allowed to (the credentials are where an
//! operator finds them: the init script the pod mounts).

use std::collections::BTreeMap;

use crate::runtime::DbAuth;

use super::net::{self, Connect};
use super::run::{Ctx, Io};
use crate::programs;

/// Runs one of the database CLIs.
pub fn run(ctx: &mut Ctx, name: &str, args: &[String], stdin: &[u8], io: &mut Io) -> i32 {
    match name {
        "mongo" | "mongosh" => mongo(ctx, args, stdin, io),
        "redis-cli" | "valkey-cli" => redis(ctx, args, io),
        _ => psql(ctx, name, args, io),
    }
}

/// The database service behind `host:port` from the pod, if a database program answers there.
fn database(ctx: &mut Ctx, host: &str, port: u16) -> Result<String, Connect> {
    let (conn, _) = net::connect(ctx, host, port);
    let Connect::Open { pod, .. } = conn else {
        return Err(conn);
    };
    let w = &*ctx.m.world;
    w.pods
        .get(&pod)
        .and_then(|p| {
            p.spec
                .containers
                .iter()
                .find_map(|c| programs::identify(ctx.m.app, c))
                .map(|prog| prog.spec.name.clone())
        })
        .ok_or(Connect::Refused)
}

/// Users a MongoDB was initialised with: the `mongo ... db.createUser(...)` lines of the init
/// script mounted into its pod, with the script's variables substituted.
/// Returns (user, password, database of its role) for each.
fn init_users(ctx: &Ctx, service: &str) -> Vec<(String, String, String)> {
    let Some(spec) = ctx.m.app.service(service) else {
        return vec![];
    };
    let ns = &ctx.m.app.namespace;
    let mut out = vec![];
    for mount in &spec.config_mounts {
        let Some(cm) = ctx
            .m
            .world
            .configmaps
            .get(&(ns.clone(), mount.config_map.clone()))
        else {
            continue;
        };
        for script in cm.data.values() {
            let mut vars = BTreeMap::new();
            for line in script.lines() {
                if let Some((k, v)) = line.split_once('=')
                    && !k.contains(' ')
                    && !k.is_empty()
                {
                    vars.insert(k.to_string(), v.trim_matches('"').to_string());
                }
                let Some(at) = line.find("createUser(") else {
                    continue;
                };
                let mut call = line[at..].to_string();
                for (k, v) in &vars {
                    call = call.replace(&format!("${k}"), v);
                }
                let field = |name: &str| -> Option<String> {
                    let i = call.find(&format!("{name}:"))? + name.len() + 1;
                    let rest = call[i..].trim_start().trim_start_matches(['\'', '"']);
                    Some(rest.split(['\'', '"']).next()?.to_string())
                };
                if let (Some(u), Some(p)) = (field("user"), field("pwd")) {
                    let db = call
                        .rfind("db:")
                        .and_then(|i| call[i + 3..].split(['\'', '"']).nth(1))
                        .unwrap_or("admin")
                        .to_string();
                    out.push((u, p, db));
                }
            }
        }
    }
    out
}

/// `mongo [db] [--host H] [--port P] [-u U -p P] [--quiet] [--eval JS]`.
fn mongo(ctx: &mut Ctx, args: &[String], stdin: &[u8], io: &mut Io) -> i32 {
    let mut host = "127.0.0.1".to_string();
    let mut port = 27017u16;
    let (mut user, mut pwd, mut eval) = (None::<String>, None::<String>, None::<String>);
    let mut quiet = false;
    let mut db = "test".to_string();
    let mut i = 0;
    while i < args.len() {
        let next = args.get(i + 1).cloned();
        match args[i].as_str() {
            "--host" => {
                let h = next.unwrap_or_default();
                match h.rsplit_once(':') {
                    Some((a, p)) => {
                        host = a.to_string();
                        port = p.parse().unwrap_or(port);
                    }
                    None => host = h,
                }
                i += 1;
            }
            "--port" => {
                port = next.and_then(|p| p.parse().ok()).unwrap_or(port);
                i += 1;
            }
            "-u" | "--username" => {
                user = next;
                i += 1;
            }
            "-p" | "--password" => {
                pwd = next;
                i += 1;
            }
            "--eval" => {
                eval = next;
                i += 1;
            }
            "--authenticationDatabase" => i += 1,
            "--quiet" => quiet = true,
            s if !s.starts_with('-') => {
                if let Some(rest) = s.strip_prefix("mongodb://") {
                    let hostport = rest.rsplit('@').next().unwrap_or(rest);
                    let (hp, d) = hostport.split_once('/').unwrap_or((hostport, "test"));
                    if let Some((h, p)) = hp.split_once(':') {
                        host = h.to_string();
                        port = p.parse().unwrap_or(port);
                    }
                    db = d.split('?').next().unwrap_or("test").to_string();
                } else {
                    db = s.to_string();
                }
            }
            _ => {}
        }
        i += 1;
    }
    if !quiet {
        io.out_line("MongoDB shell version v4.4.6");
        io.out_line(format!(
            "connecting to: mongodb://{host}:{port}/{db}?compressors=disabled&gssapiServiceName=mongodb"
        ));
    }
    let service = match database(ctx, &host, port) {
        Ok(s) => s,
        Err(_) => {
            io.out_line(format!(
                "Error: couldn't connect to server {host}:{port}, connection attempt failed: SocketException: Error connecting to {host}:{port} :: caused by :: Connection refused :\nconnect@src/mongo/shell/mongo.js:374:17\n@(connect):2:6\nexception: connect failed\nexiting with code 1"
            ));
            return 1;
        }
    };
    let auth = ctx.m.world.runtime.service(&service).db_auth;
    if auth == DbAuth::TlsRequired {
        io.out_line(format!("Error: network error while attempting to run command 'isMaster' on host '{host}:{port}'  :\nconnect@src/mongo/shell/mongo.js:374:17\nexception: connect failed\nexiting with code 1"));
        return 1;
    }
    let users = init_users(ctx, &service);
    // The client user is the last one the script creates; the first is the administrator.
    let client = users.last().cloned();
    let client_gone = auth == DbAuth::UserRemoved;
    let authed_as = match (&user, &pwd) {
        (Some(u), Some(p)) => {
            let known = users.iter().find(|(n, _, _)| n == u);
            let valid = match known {
                Some((n, pw, _)) => {
                    pw == p
                        && !(client_gone && client.as_ref().is_some_and(|c| &c.0 == n))
                        && !(auth == DbAuth::PasswordChanged
                            && client.as_ref().is_some_and(|c| &c.0 == n))
                }
                None => false,
            };
            if !valid {
                io.out_line("Error: Authentication failed. :\nconnect@src/mongo/shell/mongo.js:374:17\n@(connect):2:6\nexception: connect failed\nexiting with code 1");
                return 1;
            }
            Some(u.clone())
        }
        _ => None,
    };
    if !quiet {
        io.out_line("MongoDB server version: 4.4.6");
    }
    let js = eval.unwrap_or_else(|| String::from_utf8_lossy(stdin).into_owned());
    let admin = authed_as.is_some() && users.first().map(|u| &u.0) == authed_as.as_ref();
    let mut code = 0;
    for stmt in js
        .split([';', '\n'])
        .map(str::trim)
        .filter(|s| !s.is_empty())
    {
        code = mongo_statement(ctx, &service, stmt, &users, admin, io);
    }
    code
}

/// One shell statement; returns the exit status it leaves.
fn mongo_statement(
    ctx: &mut Ctx,
    service: &str,
    stmt: &str,
    users: &[(String, String, String)],
    admin: bool,
    io: &mut Io,
) -> i32 {
    let rt = ctx
        .m
        .world
        .runtime
        .services
        .entry(service.to_string())
        .or_default();
    let secured = !users.is_empty();
    let client = users.last().cloned();
    let compact = stmt.replace(' ', "");
    let unauthorized = |io: &mut Io, cmd: &str| {
        io.out_line(format!(
            "uncaught exception: Error: command {cmd} requires authentication :\n_getErrorWithCode@src/mongo/shell/utils.js:25:13"
        ));
        1
    };
    if compact.contains("ping") || compact == "db.version()" {
        io.out_line(if compact == "db.version()" {
            "4.4.6"
        } else {
            "{ \"ok\" : 1 }"
        });
        return 0;
    }
    if compact.contains("getUsers") || compact == "showusers" {
        if secured && !admin {
            return unauthorized(io, "usersInfo");
        }
        io.out_line("[");
        for (n, (u, _, db)) in users.iter().enumerate() {
            let is_client = client.as_ref().is_some_and(|c| &c.0 == u);
            if is_client && rt.db_auth == DbAuth::UserRemoved {
                continue;
            }
            let role = if n == 0 {
                "userAdminAnyDatabase"
            } else {
                "readWrite"
            };
            let roles = if is_client && rt.db_auth == DbAuth::RolesRevoked {
                "[ ]".to_string()
            } else {
                format!("[ {{ \"role\" : \"{role}\", \"db\" : \"{db}\" }} ]")
            };
            io.out_line(format!(
                "\t{{ \"_id\" : \"admin.{u}\", \"user\" : \"{u}\", \"db\" : \"admin\", \"roles\" : {roles}, \"mechanisms\" : [ \"SCRAM-SHA-1\", \"SCRAM-SHA-256\" ] }},"
            ));
        }
        io.out_line("]");
        return 0;
    }
    let names_client = |s: &str| {
        client.as_ref().is_some_and(|c| {
            s.contains(&format!("'{}'", c.0)) || s.contains(&format!("\"{}\"", c.0))
        })
    };
    if compact.contains("createUser(") {
        if secured && !admin {
            return unauthorized(io, "createUser");
        }
        if names_client(stmt) && rt.db_auth == DbAuth::UserRemoved {
            rt.db_auth = DbAuth::Ok;
            io.out_line(format!(
                "Successfully added user: {}",
                &stmt[stmt.find('{').unwrap_or(0)..].trim_end_matches(')')
            ));
            return 0;
        }
        let u = client.map(|c| c.0).unwrap_or_default();
        io.out_line(format!(
            "uncaught exception: Error: couldn't add user: User \"{u}@admin\" already exists :"
        ));
        return 1;
    }
    if compact.contains("grantRolesToUser(")
        || compact.contains("updateUser(")
        || compact.contains("changeUserPassword(")
    {
        if secured && !admin {
            return unauthorized(io, "grantRolesToUser");
        }
        if !names_client(stmt) {
            return 0;
        }
        match rt.db_auth {
            DbAuth::UserRemoved => {
                let u = client.map(|c| c.0).unwrap_or_default();
                io.out_line(format!(
                    "uncaught exception: Error: Could not find user \"{u}\" for db \"admin\" :"
                ));
                return 1;
            }
            DbAuth::RolesRevoked if !compact.contains("changeUserPassword") => {
                rt.db_auth = DbAuth::Ok
            }
            DbAuth::PasswordChanged
                if compact.contains("changeUserPassword") || compact.contains("pwd") =>
            {
                rt.db_auth = DbAuth::Ok
            }
            _ => {}
        }
        return 0;
    }
    if compact.contains("dropUser(") || compact.contains("revokeRolesFromUser(") {
        if secured && !admin {
            return unauthorized(io, "dropUser");
        }
        if names_client(stmt) {
            rt.db_auth = if compact.contains("dropUser") {
                DbAuth::UserRemoved
            } else {
                DbAuth::RolesRevoked
            };
        }
        io.out_line("true");
        return 0;
    }
    if compact.starts_with("showdbs") || compact.contains("listDatabases") {
        if secured && !admin {
            return unauthorized(io, "listDatabases");
        }
        let db = users.last().map_or("test", |u| u.2.as_str());
        io.out_line(format!(
            "admin   0.000GB\nconfig  0.000GB\n{db}  0.002GB\nlocal   0.000GB"
        ));
        return 0;
    }
    if compact.contains("serverStatus")
        || compact.contains("stats()")
        || compact.contains("rs.status")
    {
        io.out_line("{ \"ok\" : 1 }");
        return 0;
    }
    io.out_line(format!(
        "uncaught exception: ReferenceError: {} is not defined :\n@(shell eval):1:1",
        stmt.split(['.', '(']).next().unwrap_or(stmt)
    ));
    1
}

/// `redis-cli [-h H] [-p P] [-a PASS] [COMMAND ...]`.
fn redis(ctx: &mut Ctx, args: &[String], io: &mut Io) -> i32 {
    let mut host = "127.0.0.1".to_string();
    let mut port = 6379u16;
    let mut cmd = vec![];
    let mut i = 0;
    while i < args.len() {
        match args[i].as_str() {
            "-h" => {
                host = args.get(i + 1).cloned().unwrap_or(host);
                i += 1;
            }
            "-p" => {
                port = args.get(i + 1).and_then(|p| p.parse().ok()).unwrap_or(port);
                i += 1;
            }
            "-a" | "--user" | "-n" => i += 1,
            "--no-auth-warning" | "--raw" => {}
            s => cmd.push(s.to_string()),
        }
        i += 1;
    }
    let service = match database(ctx, &host, port) {
        Ok(s) => s,
        Err(_) => {
            io.out_line(format!(
                "Could not connect to Redis at {host}:{port}: Connection refused"
            ));
            return 1;
        }
    };
    let auth = ctx.m.world.runtime.service(&service).db_auth;
    let first = cmd.first().map(|c| c.to_uppercase()).unwrap_or_default();
    if auth != DbAuth::Ok && first != "AUTH" {
        io.out_line("(error) NOAUTH Authentication required.");
        return 0;
    }
    match first.as_str() {
        "PING" => io.out_line("PONG"),
        "AUTH" => io.out_line("(error) WRONGPASS invalid username-password pair or user is disabled."),
        "INFO" => io.out_line("# Server\r\nredis_version:7.2.4\r\nredis_mode:standalone\r\nuptime_in_seconds:86400\r\n# Clients\r\nconnected_clients:3"),
        "DBSIZE" => io.out_line("(integer) 42"),
        "" => io.out_line(format!("{host}:{port}> ")),
        other => io.out_line(format!("(error) ERR unknown command '{}', with args beginning with: ", other.to_lowercase())),
    }
    0
}

fn psql(ctx: &mut Ctx, name: &str, args: &[String], io: &mut Io) -> i32 {
    let host = args
        .iter()
        .position(|a| a == "-h")
        .and_then(|i| args.get(i + 1))
        .cloned()
        .unwrap_or_else(|| "127.0.0.1".into());
    let ok = database(ctx, &host, 5432).is_ok();
    if name == "pg_isready" {
        io.out_line(if ok {
            format!("{host}:5432 - accepting connections")
        } else {
            format!("{host}:5432 - no response")
        });
        return if ok { 0 } else { 2 };
    }
    if !ok {
        io.err_line(format!(
            "psql: error: connection to server at \"{host}\", port 5432 failed: Connection refused"
        ));
        return 2;
    }
    if let Some(q) = args
        .iter()
        .position(|a| a == "-c")
        .and_then(|i| args.get(i + 1))
    {
        if q.trim().eq_ignore_ascii_case("select 1") || q.trim().eq_ignore_ascii_case("select 1;") {
            io.out_line(" ?column? \n----------\n        1\n(1 row)\n");
            return 0;
        }
        io.out_line(format!(
            "ERROR:  syntax error at or near \"{}\"",
            q.split_whitespace().next().unwrap_or("")
        ));
        return 1;
    }
    0
}
