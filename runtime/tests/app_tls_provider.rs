//! An App makes a plain reqwest client work in the service: humus builds
//! reqwest with rustls and no provider of reqwest's choosing, which Cargo
//! turns on for the service's reqwest too, so without a process-wide
//! provider `reqwest::Client::new()` panics. (A test binary of its own:
//! the provider is the process's.)

use humus::App;
use humus::app::Error;
use humus::grpc::server::Server;

#[tokio::test]
async fn a_plain_reqwest_client_can_be_built_in_init() {
    assert!(
        rustls::crypto::CryptoProvider::get_default().is_none(),
        "nothing installed a provider before the App runs"
    );
    let exit = App::new()
        .run(|_| async move {
            let client = std::panic::catch_unwind(reqwest::Client::new);
            Err::<Vec<Server>, _>(Error::other(match client {
                Ok(_) => "built",
                Err(_) => "reqwest::Client::new panicked",
            }))
        })
        .await;
    assert_eq!(exit.error().unwrap().to_string(), "built");
    assert!(rustls::crypto::CryptoProvider::get_default().is_some());
}
