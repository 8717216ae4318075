//! The suite server (the demo server plus test-only tools) over stdio, for the tests that need a
//! real child process (the stdio leg of the suite, and the Python peer client).

#[tokio::main]
async fn main() {
    let server = tidewire_tests::suite_server();
    let code = match server.run(tidewire_stdio::server::transport()).await {
        Ok(()) => 0,
        Err(error) => {
            eprintln!("demo server: {error}");
            1
        }
    };
    // Stdin reads cannot be interrupted; leave without waiting for the runtime to drop them.
    std::process::exit(code);
}
