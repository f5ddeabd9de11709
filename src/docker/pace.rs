//! Pacing of bulk removals: many ids go to docker in small batches, a few
//! batches at a time, never all in one call.
//!
//! Why ("a hung engine"): engine 20.10's network controller can
//! deadlock when many containers go away at once. Its container-exit
//! clean-up (`releaseNetwork` -> `sandbox.Delete` -> `storeDelete`) takes
//! libnetwork's controller and datastore locks in the opposite order to
//! `getNetworksFromStore`; the more exit clean-ups run at the same moment,
//! the likelier the inversion. `docker rm -f A B C ...` removes up to 50
//! containers concurrently (the CLI's own parallelism), and it hung twice
//! here: 50 and 100 ids in one call. Paced, at most `batch * in_flight`
//! removals run at once (20 by default), each batch is its own call with
//! its own deadline, and one failed batch does not stop the others.
//!
//! `sbx destroy`, `sbx gc` and the benchmark's teardown and bare baselines
//! all go through [`Pace::run`], so the benchmark compares like with like.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

use super::{run_ok, DockerError, DockerExec, Output};

/// How bulk removals are split.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pace {
    /// Ids per docker call.
    pub batch: usize,
    /// Calls running at once.
    pub in_flight: usize,
}

impl Default for Pace {
    /// 10 ids per call, 2 calls at once: at most 20 concurrent removals,
    /// well under the 50 of one unpaced `docker rm` (which is what hung),
    /// while a 2-core engine still has work queued at every moment.
    fn default() -> Self {
        Pace { batch: 10, in_flight: 2 }
    }
}

impl Pace {
    /// One at a time (tests that need a fixed call order).
    pub fn sequential(batch: usize) -> Self {
        Pace { batch, in_flight: 1 }
    }

    /// The batches `items` splits into, in order.
    pub fn batches<'a, T>(&self, items: &'a [T]) -> std::slice::Chunks<'a, T> {
        items.chunks(self.batch.max(1))
    }

    /// Run `f` on every batch of `items`, at most `in_flight` at once, and
    /// return each batch with its result, in batch order. Every batch runs
    /// whatever the others return.
    pub fn run<'a, T, R, F>(&self, items: &'a [T], f: F) -> Vec<(&'a [T], R)>
    where
        T: Sync,
        R: Send,
        F: Fn(&'a [T]) -> R + Sync,
    {
        self.run_until(items, f, |_| false).into_iter().filter_map(|(b, r)| r.map(|r| (b, r))).collect()
    }

    /// Like [`run`](Self::run), but once a result satisfies `stop` no further
    /// batch starts (those in flight finish); a batch never started comes
    /// back with `None`. For an engine that stopped answering: every later
    /// batch would only wait out its own deadline.
    pub fn run_until<'a, T, R, F, S>(&self, items: &'a [T], f: F, stop: S) -> Vec<(&'a [T], Option<R>)>
    where
        T: Sync,
        R: Send,
        F: Fn(&'a [T]) -> R + Sync,
        S: Fn(&R) -> bool + Sync,
    {
        let batches: Vec<&'a [T]> = self.batches(items).collect();
        let workers = self.in_flight.max(1).min(batches.len());
        let next = AtomicUsize::new(0);
        let stopped = AtomicBool::new(false);
        let results: Mutex<Vec<Option<R>>> = Mutex::new(batches.iter().map(|_| None).collect());
        let work = || loop {
            if stopped.load(Ordering::SeqCst) {
                break;
            }
            let i = next.fetch_add(1, Ordering::SeqCst);
            let Some(b) = batches.get(i) else { break };
            let r = f(b);
            if stop(&r) {
                stopped.store(true, Ordering::SeqCst);
            }
            results.lock().unwrap_or_else(|e| e.into_inner())[i] = Some(r);
        };
        if workers <= 1 {
            work();
        } else {
            std::thread::scope(|s| {
                for _ in 0..workers {
                    s.spawn(work);
                }
            });
        }
        let results = results.into_inner().unwrap_or_else(|e| e.into_inner());
        batches.into_iter().zip(results).collect()
    }
}

/// `docker rm -f -v` of `ids`, paced: each batch with its result (a
/// non-zero exit is an error here). For callers without sbx's "already
/// gone" handling, such as the benchmark's bare baseline.
pub fn remove_containers<'a, S: AsRef<str> + Sync>(
    exec: &dyn DockerExec,
    pace: Pace,
    ids: &'a [S],
) -> Vec<(&'a [S], Result<Output, DockerError>)> {
    pace.run(ids, |batch| run_ok(exec, &super::argv::remove(batch)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn batches_keep_order_and_cover_every_item_once() {
        let items: Vec<u32> = (0..23).collect();
        let p = Pace { batch: 10, in_flight: 3 };
        let sizes: Vec<usize> = p.batches(&items).map(<[u32]>::len).collect();
        assert_eq!(sizes, [10, 10, 3]);
        let out = p.run(&items, |b| b.iter().sum::<u32>());
        let flat: Vec<u32> = out.iter().flat_map(|(b, _)| b.iter().copied()).collect();
        assert_eq!(flat, items, "results come back in batch order");
        assert_eq!(out.iter().map(|(_, s)| *s).collect::<Vec<_>>(), [45, 145, 63]);
        assert!(Pace::default().run(&[] as &[u32], |_| ()).is_empty());
    }

    #[test]
    fn never_more_than_in_flight_calls_at_once() {
        let items: Vec<u32> = (0..50).collect();
        let now = AtomicUsize::new(0);
        let peak = AtomicUsize::new(0);
        let p = Pace { batch: 5, in_flight: 2 };
        let out = p.run(&items, |b| {
            let n = now.fetch_add(1, Ordering::SeqCst) + 1;
            peak.fetch_max(n, Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(5));
            now.fetch_sub(1, Ordering::SeqCst);
            b.len()
        });
        assert_eq!(out.len(), 10);
        assert!(peak.load(Ordering::SeqCst) <= 2, "peak {}", peak.load(Ordering::SeqCst));
    }

    #[test]
    fn a_failed_batch_does_not_stop_the_rest() {
        let fake = super::super::fake::FakeDocker::new();
        fake.push(Output::ok(""));
        fake.push(Output::fail(1, "Error response from daemon: boom"));
        fake.push(Output::ok(""));
        let ids: Vec<String> = (0..25).map(|i| format!("c{i:02}")).collect();
        let out = remove_containers(&fake, Pace::sequential(10), &ids);
        let calls = fake.calls();
        assert_eq!(calls.len(), 3);
        let mut want = vec!["rm", "-f", "-v", "--"];
        want.extend(ids[10..20].iter().map(String::as_str));
        assert_eq!(calls[1], want);
        assert_eq!(calls[2][4..], ids[20..]);
        assert!(out[0].1.is_ok() && out[2].1.is_ok());
        match &out[1].1 {
            Err(DockerError::Status { stderr, .. }) => assert!(stderr.contains("boom")),
            other => panic!("{other:?}"),
        }
        assert_eq!(out[1].0, &ids[10..20]);
    }

    #[test]
    fn once_the_engine_stops_answering_no_further_batch_starts() {
        let items: Vec<u32> = (0..40).collect();
        let out = Pace::sequential(10).run_until(&items, |b| b[0] != 10, |ok| !ok);
        let got: Vec<Option<bool>> = out.iter().map(|(_, r)| *r).collect();
        assert_eq!(got, [Some(true), Some(false), None, None]);
        // In flight: the other batch running finishes; none starts after.
        let started = AtomicUsize::new(0);
        let both = std::sync::Barrier::new(2);
        let out = Pace { batch: 10, in_flight: 2 }.run_until(
            &items,
            |_| {
                started.fetch_add(1, Ordering::SeqCst);
                // Both in flight before either fails.
                both.wait();
                false
            },
            |ok| !ok,
        );
        assert_eq!(started.load(Ordering::SeqCst), 2, "{out:?}");
        assert_eq!(out.iter().filter(|(_, r)| r.is_none()).count(), 2);
    }
}
