//! What a connection of `sbx serve` counts to close itself once idle: a
//! connection with no request open is closed after a while instead of
//! being held forever, soon while it has only been refused, late once it
//! has been served (so a client's pool, not the server, ends it).

use std::sync::Arc;

use super::http::Body;

/// The requests open on one connection, since when it has had none, and
/// whether any request on it has been let in (a key or token that matched).
#[derive(Default)]
pub struct Activity(std::sync::Mutex<State>);

#[derive(Default)]
struct State {
    open: usize,
    since: Option<std::time::Instant>,
    served: bool,
}

impl Activity {
    pub fn begin(self: &Arc<Self>) -> Busy {
        self.lock().open += 1;
        Busy(self.clone())
    }

    /// A request on this connection was let in: from now on it may idle
    /// for the long limit.
    pub fn served(&self) {
        self.lock().served = true;
    }

    /// Resolves once no request has been open for `refused` (while no
    /// request has been let in) or for `served` (once one has).
    pub async fn idle(&self, refused: std::time::Duration, served: std::time::Duration) {
        let start = std::time::Instant::now();
        loop {
            let wait = {
                let a = self.lock();
                let limit = if a.served { served } else { refused };
                let quiet = a.since.unwrap_or(start).elapsed();
                match a.open {
                    0 if quiet >= limit => return,
                    0 => limit - quiet,
                    _ => limit,
                }
            };
            tokio::time::sleep(wait).await;
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// One open request: it ends when its response body has been sent or dropped.
pub struct Busy(Arc<Activity>);

impl Drop for Busy {
    fn drop(&mut self) {
        let mut a = self.0.lock();
        a.open -= 1;
        a.since = Some(std::time::Instant::now());
    }
}

/// A response body that keeps its request counted as open while it lasts.
pub struct Tracked {
    pub body: Body,
    pub _busy: Busy,
}

impl hyper::body::Body for Tracked {
    type Data = bytes::Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<std::result::Result<hyper::body::Frame<Self::Data>, Self::Error>>> {
        std::pin::Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.body.size_hint()
    }
}
