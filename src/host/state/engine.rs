//! Which engine a sandbox's files on this machine belong to:
//! its marker or socket directory, TTL, marks and claims are here whichever
//! engine it runs on, and `gc`, `destroy` and the pool's bookkeeping decide
//! "its container is gone" by asking one engine. They act only on ids
//! attributed to the engine they ask.
//!
//! `engines/<id>` holds the endpoint (`model::engine::Engine::endpoint`,
//! credentials stripped) the sandbox was created on, written by sbx in its
//! own data dir (never in a directory a sandbox can write). Absent: the
//! default local engine, which is what records made before it meant. Two
//! names for one engine (a context and DOCKER_HOST, `unix://` and `ssh://`
//! to the same daemon) are two endpoints: each leaves the other's alone.

use super::State;
use crate::error::Result;
use crate::model::engine::DEFAULT_ENDPOINT;

const KIND: &str = "engines";

impl State {
    /// Attribute sandbox `id` to the engine at `endpoint`: written before
    /// any of its other files but the create's own record (see `create`).
    pub fn set_engine(&self, id: &str, endpoint: &str) -> Result<()> {
        if endpoint == DEFAULT_ENDPOINT {
            self.drop_file(KIND, id);
            return Ok(());
        }
        if self.engine_of(id) == endpoint {
            return Ok(());
        }
        self.put(KIND, id, &format!("{endpoint}\n"))
    }

    /// The endpoint of the engine sandbox `id` was made on.
    pub fn engine_of(&self, id: &str) -> String {
        match self.get(KIND, id) {
            Some(t) => t.trim_end_matches('\n').to_string(),
            None => DEFAULT_ENDPOINT.to_string(),
        }
    }

    /// Sandbox `id`'s files here belong to the engine at `endpoint`.
    pub fn belongs(&self, id: &str, endpoint: &str) -> bool {
        self.engine_of(id) == endpoint
    }

    /// Every id with an attribution file (gc forgets those left alone
    /// once their sandbox is gone from that engine).
    pub fn attributed(&self) -> Vec<String> {
        self.ids(KIND)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absent_is_the_default_engine_and_each_endpoint_is_its_own() {
        let s = State::at(std::env::temp_dir().join(format!("sbx-engines-{}", rand::random::<u64>())));
        let id = "sbx-0123456789ab";
        assert!(s.belongs(id, DEFAULT_ENDPOINT));
        s.set_engine(id, "ssh://root@127.0.0.1:2222").unwrap();
        assert!(s.belongs(id, "ssh://root@127.0.0.1:2222"));
        assert!(!s.belongs(id, DEFAULT_ENDPOINT) && !s.belongs(id, "ssh://root@127.0.0.1:2223"));
        assert_eq!(s.attributed(), [id]);
        s.forget(id);
        assert!(s.belongs(id, DEFAULT_ENDPOINT) && s.attributed().is_empty());
        s.set_engine(id, DEFAULT_ENDPOINT).unwrap();
        assert!(s.attributed().is_empty(), "the default engine writes nothing");
        let _ = std::fs::remove_dir_all(&s.dir);
    }
}
