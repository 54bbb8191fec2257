//! Write-ahead log and manifest: crash simulation against a model, fault injection, real
//! files with a torn tail.

use std::path::{Path, PathBuf};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sagitta_storage::fs::{FileSystem, OsFileSystem};
use sagitta_storage::manifest;
use sagitta_storage::sim::SimFileSystem;
use sagitta_storage::wal::{Wal, RECORD_BYTES_MAX};
use sagitta_storage::StorageError;

fn payload(rng: &mut ChaCha8Rng, tag: u64) -> Vec<u8> {
    let length = rng.gen_range(0..300);
    let mut bytes = tag.to_le_bytes().to_vec();
    bytes.extend((0..length).map(|_| rng.gen::<u8>()));
    bytes
}

/// One seeded run: random batches, syncs and crashes against a model. After every crash
/// the log must hold every synced record, then a prefix of the unsynced ones, unchanged.
fn simulate(seed: u64) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let fs = SimFileSystem::new();
    let path = Path::new("/db/shard-0/wal");
    let (mut wal, recovery) = Wal::open(&fs, path, 1).unwrap();
    assert!(recovery.records.is_empty());
    let mut synced: Vec<Vec<u8>> = Vec::new();
    let mut unsynced: Vec<Vec<u8>> = Vec::new();
    let mut tag = 0;
    for _ in 0..rng.gen_range(5..60) {
        match rng.gen_range(0..10) {
            0..=5 => {
                let batch: Vec<Vec<u8>> = (0..rng.gen_range(1..6))
                    .map(|_| {
                        tag += 1;
                        payload(&mut rng, tag)
                    })
                    .collect();
                let slices: Vec<&[u8]> = batch.iter().map(Vec::as_slice).collect();
                let range = wal.append(&slices).unwrap();
                assert_eq!(range.end - range.start, batch.len() as u64);
                unsynced.extend(batch);
            }
            6..=7 => {
                wal.sync().unwrap();
                synced.append(&mut unsynced);
            }
            _ => {
                drop(wal);
                fs.crash(&mut rng);
                let (reopened, recovery) = Wal::open(&fs, path, 1).unwrap();
                let recovered: Vec<Vec<u8>> =
                    recovery.records.iter().map(|r| r.payload.clone()).collect();
                assert!(
                    recovered.len() >= synced.len(),
                    "seed {seed}: lost synced records"
                );
                assert_eq!(recovered[..synced.len()], synced[..], "seed {seed}");
                let extra = &recovered[synced.len()..];
                assert!(
                    extra.len() <= unsynced.len(),
                    "seed {seed}: invented records"
                );
                assert_eq!(
                    extra,
                    &unsynced[..extra.len()],
                    "seed {seed}: altered records"
                );
                for (index, record) in recovery.records.iter().enumerate() {
                    assert_eq!(record.sequence, 1 + index as u64, "seed {seed}");
                }
                // what survived is now the truth; a second open finds no torn tail
                synced = recovered;
                unsynced.clear();
                wal = reopened;
            }
        }
    }
}

#[test]
fn wal_survives_thousands_of_seeded_crashes() {
    for seed in 0..2_000 {
        simulate(seed);
    }
}

#[test]
fn reopening_twice_is_stable() {
    let fs = SimFileSystem::new();
    let path = Path::new("/db/wal");
    let (mut wal, _) = Wal::open(&fs, path, 10).unwrap();
    wal.append(&[b"one", b"two"]).unwrap();
    wal.sync().unwrap();
    wal.append(&[b"three"]).unwrap();
    drop(wal);
    let (wal, first) = Wal::open(&fs, path, 10).unwrap();
    assert_eq!(first.records.len(), 3);
    assert_eq!(first.records[2].sequence, 12);
    assert_eq!(wal.next_sequence(), 13);
    drop(wal);
    let (_, second) = Wal::open(&fs, path, 10).unwrap();
    assert_eq!(second, first);
}

#[test]
fn failed_write_poisons_the_log_and_synced_data_survives() {
    let fs = SimFileSystem::new();
    let path = Path::new("/db/wal");
    let (mut wal, _) = Wal::open(&fs, path, 1).unwrap();
    wal.append(&[b"durable"]).unwrap();
    wal.sync().unwrap();
    fs.fail_write_after(1);
    assert!(matches!(
        wal.append(&[b"lost"]),
        Err(StorageError::Io { .. })
    ));
    // after an I/O error the tail is unknown: nothing more is accepted
    assert!(matches!(
        wal.append(&[b"more"]),
        Err(StorageError::Poisoned { .. })
    ));
    assert!(matches!(wal.sync(), Err(StorageError::Poisoned { .. })));
    drop(wal);
    fs.crash(&mut ChaCha8Rng::seed_from_u64(1));
    let (_, recovery) = Wal::open(&fs, path, 1).unwrap();
    assert_eq!(recovery.records.len(), 1);
    assert_eq!(recovery.records[0].payload, b"durable");
}

#[test]
fn disk_full_and_failed_sync_are_reported_and_poison() {
    let fs = SimFileSystem::new();
    let path = Path::new("/db/wal");
    let (mut wal, _) = Wal::open(&fs, path, 1).unwrap();
    fs.set_space_left(Some(40));
    let error = wal.append(&[&[7u8; 100]]).unwrap_err();
    assert!(matches!(error, StorageError::NoSpace { .. }), "{error}");
    assert!(error.to_string().contains("no space left"));
    assert!(matches!(
        wal.append(&[b"x"]),
        Err(StorageError::Poisoned { .. })
    ));

    let fs = SimFileSystem::new();
    let (mut wal, _) = Wal::open(&fs, path, 1).unwrap();
    wal.append(&[b"pending"]).unwrap();
    fs.set_fail_syncs(true);
    assert!(matches!(wal.sync(), Err(StorageError::Io { .. })));
    assert!(matches!(
        wal.append(&[b"x"]),
        Err(StorageError::Poisoned { .. })
    ));
}

#[test]
fn oversized_records_are_rejected_before_writing() {
    let fs = SimFileSystem::new();
    let (mut wal, _) = Wal::open(&fs, Path::new("/db/wal"), 1).unwrap();
    let before = wal.len_bytes();
    let huge = vec![0u8; RECORD_BYTES_MAX + 1];
    assert!(matches!(
        wal.append(&[b"fine", &huge]),
        Err(StorageError::RecordTooLarge { .. })
    ));
    assert_eq!(wal.len_bytes(), before);
    wal.append(&[b"still usable"]).unwrap();
}

#[test]
fn corrupt_header_is_an_error_not_a_fresh_log() {
    let fs = SimFileSystem::new();
    let path = Path::new("/db/wal");
    let (mut wal, _) = Wal::open(&fs, path, 1).unwrap();
    wal.append(&[b"data"]).unwrap();
    wal.sync().unwrap();
    drop(wal);
    let mut bytes = fs.read(path).unwrap().unwrap();
    bytes[9] ^= 1;
    fs.write_synced(path, &bytes).unwrap();
    assert!(matches!(
        Wal::open(&fs, path, 1),
        Err(StorageError::Corrupt { offset: 0, .. })
    ));
}

fn temporary_directory(name: &str) -> PathBuf {
    let directory = std::env::temp_dir().join(format!("sagitta-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&directory);
    std::fs::create_dir_all(&directory).unwrap();
    directory
}

#[test]
fn real_files_torn_and_corrupt_tails_are_truncated() {
    let directory = temporary_directory("wal-tail");
    let path = directory.join("wal");
    let fs = OsFileSystem;
    let (mut wal, _) = Wal::open(&fs, &path, 1).unwrap();
    let payloads: Vec<Vec<u8>> = (0..10u8).map(|i| vec![i; 100 + usize::from(i)]).collect();
    let slices: Vec<&[u8]> = payloads.iter().map(Vec::as_slice).collect();
    wal.append(&slices).unwrap();
    wal.sync().unwrap();
    let clean_length = wal.len_bytes();
    drop(wal);

    // a torn record: a header promising more bytes than follow
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    std::io::Write::write_all(&mut file, &[200, 0, 0, 0, 1, 2, 3, 4, 11, 0, 0]).unwrap();
    drop(file);
    let (wal, recovery) = Wal::open(&fs, &path, 1).unwrap();
    assert_eq!(recovery.records.len(), 10);
    assert_eq!(recovery.truncated_bytes, 11);
    assert_eq!(std::fs::metadata(&path).unwrap().len(), clean_length);
    drop(wal);

    // a bit flip inside the last record: it and only it is dropped
    let mut bytes = std::fs::read(&path).unwrap();
    let last = bytes.len() - 5;
    bytes[last] ^= 0x20;
    std::fs::write(&path, &bytes).unwrap();
    let (mut wal, recovery) = Wal::open(&fs, &path, 1).unwrap();
    assert_eq!(recovery.records.len(), 9);
    assert_eq!(recovery.records[8].payload, payloads[8]);
    // the log continues at the first lost sequence number
    assert_eq!(wal.append(&[b"next"]).unwrap(), 10..11);
    std::fs::remove_dir_all(&directory).unwrap();
}

#[test]
fn manifest_publication_is_atomic_across_crashes() {
    let directory = Path::new("/db");
    for seed in 0..200 {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let fs = SimFileSystem::new();
        manifest::publish(&fs, directory, b"version one").unwrap();
        // the second publication fails at a random step (or succeeds), then power is lost
        let step = rng.gen_range(1..=4);
        match step {
            1 => fs.fail_write_after(1),            // writing MANIFEST.tmp
            2 => fs.set_fail_syncs(true),           // fsync of MANIFEST.tmp
            3 => fs.set_fail_directory_syncs(true), // fsync of the directory after rename
            _ => {}                                 // completes
        }
        let result = manifest::publish(&fs, directory, b"version two, longer");
        assert_eq!(result.is_ok(), step == 4, "seed {seed} step {step}");
        fs.crash(&mut rng);
        let loaded = manifest::load(&fs, directory).unwrap().unwrap();
        let expected: &[u8] = if step == 4 {
            b"version two, longer"
        } else {
            b"version one"
        };
        assert_eq!(loaded, expected, "seed {seed} step {step}");
    }
    let fs = SimFileSystem::new();
    assert_eq!(manifest::load(&fs, directory).unwrap(), None);
    manifest::publish(&fs, directory, b"x").unwrap();
    let mut bytes = fs.read(&directory.join("MANIFEST")).unwrap().unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    fs.write_synced(&directory.join("MANIFEST"), &bytes)
        .unwrap();
    assert!(matches!(
        manifest::load(&fs, directory),
        Err(StorageError::Corrupt { .. })
    ));
    // the header's reserved word is outside the payload checksum: it is checked on its own
    manifest::publish(&fs, directory, b"x").unwrap();
    let mut bytes = fs.read(&directory.join("MANIFEST")).unwrap().unwrap();
    bytes[21] ^= 1;
    fs.write_synced(&directory.join("MANIFEST"), &bytes)
        .unwrap();
    match manifest::load(&fs, directory) {
        Err(StorageError::Corrupt { offset, reason, .. }) => {
            assert_eq!(offset, 20);
            assert!(reason.contains("reserved"), "{reason}");
        }
        other => panic!("a manifest with reserved bytes set loaded: {other:?}"),
    }
}

#[test]
fn real_manifest_round_trip() {
    let directory = temporary_directory("manifest");
    manifest::publish(&OsFileSystem, &directory, b"segments: 1").unwrap();
    manifest::publish(&OsFileSystem, &directory, b"segments: 1, 2").unwrap();
    assert_eq!(
        manifest::load(&OsFileSystem, &directory).unwrap().unwrap(),
        b"segments: 1, 2"
    );
    assert!(!directory.join("MANIFEST.tmp").exists());
    std::fs::remove_dir_all(&directory).unwrap();
}
