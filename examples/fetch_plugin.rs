//! Prints the path of a known PJRT plugin, fetching it into the cache first if needed.
//!
//! `cargo run --example fetch_plugin -- cpu` (API 0.115, the default) or
//! `-- cpu-legacy` (API 0.81). Used to run the test suite against each plugin:
//! `PJRT_PLUGIN_PATH=$(cargo run -q --example fetch_plugin -- cpu-legacy) cargo test`.

use xlaclient::install::{KnownPlugin, known_plugin_path};

fn main() {
    let name = std::env::args().nth(1).unwrap_or_else(|| "cpu".into());
    let Some(plugin) = KnownPlugin::from_name(&name) else {
        let names: Vec<&str> = KnownPlugin::all().iter().map(|p| p.name()).collect();
        eprintln!("unknown plugin {name:?}; known: {}", names.join(", "));
        std::process::exit(2);
    };
    match known_plugin_path(plugin) {
        Ok(path) => println!("{}", path.display()),
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    }
}
