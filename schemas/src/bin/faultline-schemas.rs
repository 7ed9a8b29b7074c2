//! Writes the JSON Schema of every faultline document into a directory.
//!
//! Example: `cargo run -p schemas --bin faultline-schemas -- schemas/json`

fn main() {
    const USAGE: &str = "usage: faultline-schemas DIR\nexample: faultline-schemas schemas/json";
    let Some(dir) = std::env::args().nth(1) else {
        eprintln!("{USAGE}");
        std::process::exit(2);
    };
    if dir.starts_with('-') {
        // --help, -h: never taken for a directory name.
        println!("Writes the JSON Schema of every faultline document into DIR.\n{USAGE}");
        std::process::exit(if dir == "--help" || dir == "-h" { 0 } else { 2 });
    }
    let dir = std::path::Path::new(&dir);
    if let Err(e) = std::fs::create_dir_all(dir) {
        eprintln!("cannot create {}: {e}", dir.display());
        std::process::exit(1);
    }
    for (file, schema) in schemas::json_schema::documents() {
        let path = dir.join(file);
        let tmp = dir.join(format!(".{file}.tmp"));
        let written = std::fs::write(&tmp, schemas::json_schema::render(&schema))
            .and_then(|()| std::fs::rename(&tmp, &path));
        if let Err(e) = written {
            eprintln!("cannot write {}: {e}", path.display());
            std::process::exit(1);
        }
        println!("wrote {}", path.display());
    }
}
