//! A database: a directory of named collections (`collections/<name>/`) and a manifest that
//! lists them. Creating or dropping a collection republishes the manifest atomically, so a
//! crash leaves the old list or the new one.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::RwLock;
use sagitta_storage::fs::FileSystem;
use sagitta_storage::manifest;

use crate::collection::{Collection, CollectionConfig};
use crate::error::{EngineError, Result};

/// Longest collection name.
pub const MAX_COLLECTION_NAME_BYTES: usize = 255;

pub struct Database {
    fs: Arc<dyn FileSystem>,
    root: PathBuf,
    collections: RwLock<BTreeMap<String, Arc<Collection>>>,
}

/// Names are 1..=255 bytes of ASCII letters, digits, `_`, `-` and `.` (not `.` or `..`),
/// so a name is always one safe path component.
pub fn check_collection_name(name: &str) -> Result<()> {
    let valid = !name.is_empty()
        && name.len() <= MAX_COLLECTION_NAME_BYTES
        && name != "."
        && name != ".."
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'.');
    if valid {
        Ok(())
    } else {
        Err(EngineError::InvalidCollectionName {
            name: name.to_string(),
        })
    }
}

impl Database {
    /// Opens (or creates) the database in `root`, opening every listed collection.
    pub fn open(fs: Arc<dyn FileSystem>, root: &Path) -> Result<Database> {
        fs.create_dir_all(&root.join("collections"))?;
        let names: Vec<String> = match manifest::load(fs.as_ref(), root)? {
            None => Vec::new(),
            Some(bytes) => String::from_utf8(bytes)
                .map_err(|_| EngineError::Corrupt {
                    reason: format!("{}: database manifest is not UTF-8", root.display()),
                })?
                .lines()
                .map(str::to_string)
                .collect(),
        };
        let mut collections = BTreeMap::new();
        for name in names {
            check_collection_name(&name).map_err(|_| EngineError::Corrupt {
                reason: format!("database manifest lists an invalid name {name:?}"),
            })?;
            let collection = Collection::open(fs.as_ref(), &Self::directory(root, &name))?;
            collections.insert(name, Arc::new(collection));
        }
        Ok(Database {
            fs,
            root: root.to_path_buf(),
            collections: RwLock::new(collections),
        })
    }

    fn directory(root: &Path, name: &str) -> PathBuf {
        root.join("collections").join(name)
    }

    fn publish(&self, names: impl Iterator<Item = String>) -> Result<()> {
        let list: Vec<String> = names.collect();
        manifest::publish(self.fs.as_ref(), &self.root, list.join("\n").as_bytes())?;
        Ok(())
    }

    pub fn list(&self) -> Vec<String> {
        self.collections.read().keys().cloned().collect()
    }

    pub fn collection(&self, name: &str) -> Result<Arc<Collection>> {
        self.collections
            .read()
            .get(name)
            .cloned()
            .ok_or_else(|| EngineError::CollectionNotFound {
                path: name.to_string(),
            })
    }

    pub fn create_collection(
        &self,
        name: &str,
        config: CollectionConfig,
    ) -> Result<Arc<Collection>> {
        check_collection_name(name)?;
        let mut collections = self.collections.write();
        if collections.contains_key(name) {
            return Err(EngineError::CollectionExists {
                path: name.to_string(),
            });
        }
        let directory = Self::directory(&self.root, name);
        // Leftovers of a create that crashed before the database manifest listed it.
        Collection::remove_files(self.fs.as_ref(), &directory)?;
        let collection = Arc::new(Collection::create(self.fs.as_ref(), &directory, config)?);
        self.publish(collections.keys().cloned().chain([name.to_string()]))?;
        collections.insert(name.to_string(), Arc::clone(&collection));
        Ok(collection)
    }

    /// Drops a collection: unlisted first (durably), then its files are removed.
    pub fn drop_collection(&self, name: &str) -> Result<()> {
        let mut collections = self.collections.write();
        let Some(collection) = collections.get(name).cloned() else {
            return Err(EngineError::CollectionNotFound {
                path: name.to_string(),
            });
        };
        self.publish(collections.keys().filter(|n| *n != name).cloned())?;
        collections.remove(name);
        Collection::remove_files(self.fs.as_ref(), collection.directory())?;
        Ok(())
    }
}
