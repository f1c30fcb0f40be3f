//! Starts a PostgreSQL server for a bench or a session by hand (as the tests start theirs: installed if missing,
//! a cluster in a temporary folder, on a free loopback port), prints its connection string, and keeps it until
//! its stdin ends (Ctrl-D), then stops and removes it. For the benches, in a terminal of its own:
//! `cargo run -p agentry-tests --bin postgres_server`, then
//! `AGENTRY_BENCH_POSTGRES='<the string>' cargo bench -p agentry --features postgres --bench throughput`.

use std::io::BufRead;

fn main() {
    let postgres = match agentry_tests::postgres::Postgres::start() {
        Ok(postgres) => postgres,
        Err(why) => {
            eprintln!("no PostgreSQL server: {why}");
            std::process::exit(1);
        }
    };
    println!("{}", postgres.url());
    // Until stdin ends: the server is stopped and removed when `postgres` is dropped.
    for _ in std::io::stdin().lock().lines().map_while(Result::ok) {}
    drop(postgres);
}
