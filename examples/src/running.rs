//! A service run as a [`humus::App`](../../humus/app/struct.App.html) in a task of this process, as the
//! walkthrough and the tests run the wallet and the ledger: the App's
//! lifecycle, stopped on demand instead of by a signal.

use std::future::Future;
use std::net::SocketAddr;

use humus::app::{Error, ErrorKind, Exit};
use humus::grpc::server::Server;
use humus::{App, Setup};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// A service's App running in a task, until [`stop`](Running::stop).
#[derive(Debug)]
pub struct Running {
    addr: SocketAddr,
    stop: oneshot::Sender<()>,
    app: JoinHandle<Exit>,
}

/// Runs `app` in a task with an init that builds one server with `build`
/// and listens on its address, and returns once it listens.
///
/// # Errors
///
/// [`Error`](../../humus/app/struct.Error.html) when the App ends before
/// it listens (its init failed, or its address is taken), of the App's
/// error's kind: a settings error (exit 78), or another (exit 1).
pub async fn start<F, Fut>(app: App, build: F) -> Result<Running, Error>
where
    F: FnOnce(Setup) -> Fut + Send + 'static,
    Fut: Future<Output = Result<Server, Error>> + Send,
{
    let (listening, addr) = oneshot::channel();
    let (stop, stopped) = oneshot::channel::<()>();
    let app = app.stop_on(async move {
        let _ = stopped.await;
    });
    let task = tokio::spawn(app.run(move |setup| async move {
        let mut server = build(setup).await?;
        server.bind().await?;
        let _ = listening.send(server.local_addr());
        Ok(vec![server])
    }));
    match addr.await {
        Ok(Some(addr)) => Ok(Running {
            addr,
            stop,
            app: task,
        }),
        Ok(None) => Err(Error::other("the server listens on no socket address")),
        Err(_) => Err(failure(joined(task).await)),
    }
}

async fn joined(task: JoinHandle<Exit>) -> Exit {
    match task.await {
        Ok(exit) => exit,
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Err(e) => panic!("the App's task was cancelled: {e}"),
    }
}

/// The error of an App that did not exit 0, of its error's kind.
fn failure(exit: Exit) -> Error {
    let message = exit
        .error()
        .map(ToString::to_string)
        .unwrap_or_else(|| format!("exited {}", exit.code()));
    let message = format!("exit {}: {message}", exit.code());
    match exit.error().map(Error::kind) {
        Some(ErrorKind::Settings) => Error::settings(message),
        _ => Error::other(message),
    }
}

impl Running {
    /// The address the service listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops the App as SIGTERM would (a graceful shutdown of its server,
    /// its on-stop hooks, its telemetry's shutdown) and waits for its exit.
    ///
    /// # Errors
    ///
    /// [`Error`](../../humus/app/struct.Error.html) when the App did not
    /// exit 0.
    pub async fn stop(self) -> Result<(), Error> {
        let _ = self.stop.send(());
        let exit = joined(self.app).await;
        if exit.code() == 0 {
            Ok(())
        } else {
            Err(failure(exit))
        }
    }

    /// Starts the graceful shutdown and returns at once; [`stop`](Running::stop)
    /// then waits for the exit.
    pub fn begin_stop(&mut self) {
        let (spent, _) = oneshot::channel();
        let stop = std::mem::replace(&mut self.stop, spent);
        let _ = stop.send(());
    }
}
