//! Collection aliases: other names a collection answers to, as Qdrant's
//! `POST /collections/aliases` defines them. They live in the database manifest beside the
//! collection names (docs/format.md, "Database manifest"), so a change of aliases, a
//! collection's drop and the removal of its aliases are each one atomic publication.

use std::collections::BTreeMap;

use crate::error::{EngineError, Result};
use crate::names::check_collection_name;

/// One change of [`crate::Database::update_aliases`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AliasAction {
    /// Points `alias` at `collection` (which must exist), replacing where it pointed.
    Create { alias: String, collection: String },
    /// Removes `alias`; removing an alias that does not exist changes nothing.
    Delete { alias: String },
    /// Renames alias `from` (which must exist) to `to`, keeping its collection.
    Rename { from: String, to: String },
}

/// The alias → collection map.
pub(crate) type Aliases = BTreeMap<String, String>;

/// The prefix of an alias line in the database manifest; collection names cannot contain
/// a space, so no collection line starts with it.
const ALIAS_LINE: &str = "alias ";

/// Applies `actions` in order to a copy of `aliases`: an alias must point at an existing
/// collection (`is_collection`) and may not take a name a collection has or is being
/// imported under (`is_taken`). The first action that fails fails them all, and nothing
/// changes.
pub(crate) fn apply(
    aliases: &Aliases,
    actions: &[AliasAction],
    is_collection: impl Fn(&str) -> bool,
    is_taken: impl Fn(&str) -> bool,
) -> Result<Aliases> {
    let mut next = aliases.clone();
    for action in actions {
        match action {
            AliasAction::Create { alias, collection } => {
                check_alias_name("alias_name", alias)?;
                if !is_collection(collection) {
                    return Err(EngineError::CollectionNotFound {
                        path: collection.clone(),
                    });
                }
                check_not_a_collection(alias, &is_taken)?;
                next.insert(alias.clone(), collection.clone());
            }
            AliasAction::Delete { alias } => {
                next.remove(alias);
            }
            AliasAction::Rename { from, to } => {
                check_alias_name("new_alias_name", to)?;
                let collection = next
                    .remove(from)
                    .ok_or_else(|| EngineError::AliasNotFound {
                        alias: from.clone(),
                    })?;
                check_not_a_collection(to, &is_taken)?;
                next.insert(to.clone(), collection);
            }
        }
    }
    Ok(next)
}

fn check_alias_name(field: &'static str, alias: &str) -> Result<()> {
    check_collection_name(alias).map_err(|_| EngineError::NameInUse {
        reason: format!(
            "`{field}` {alias:?} is not a valid name: 1 to 255 ASCII letters, digits, `_`, \
             `-` or `.`"
        ),
    })
}

fn check_not_a_collection(alias: &str, is_taken: impl Fn(&str) -> bool) -> Result<()> {
    if is_taken(alias) {
        return Err(EngineError::NameInUse {
            reason: format!("Collection `{alias}` already exists!"),
        });
    }
    Ok(())
}

/// The database manifest's text: one collection name a line, then one
/// `alias <alias> <collection>` line an alias.
pub(crate) fn manifest_text<'a>(names: impl Iterator<Item = &'a str>, aliases: &Aliases) -> String {
    let mut lines: Vec<String> = names.map(str::to_string).collect();
    lines.extend(
        aliases
            .iter()
            .map(|(alias, collection)| format!("{ALIAS_LINE}{alias} {collection}")),
    );
    lines.join("\n")
}

/// The collection names and aliases of a database manifest's text, each name checked and
/// each alias naming a listed collection.
pub(crate) fn parse_manifest(text: &str) -> Result<(Vec<String>, Aliases)> {
    let corrupt = |reason: String| EngineError::Corrupt {
        reason: format!("database manifest: {reason}"),
    };
    let (mut names, mut aliases) = (Vec::new(), Aliases::new());
    for line in text.lines() {
        match line.strip_prefix(ALIAS_LINE) {
            None => {
                check_collection_name(line)
                    .map_err(|_| corrupt(format!("lists an invalid name {line:?}")))?;
                names.push(line.to_string());
            }
            Some(rest) => {
                let (alias, collection) = rest
                    .split_once(' ')
                    .ok_or_else(|| corrupt(format!("alias line {line:?} has no collection")))?;
                check_collection_name(alias)
                    .and_then(|()| check_collection_name(collection))
                    .map_err(|_| corrupt(format!("alias line {line:?} names an invalid name")))?;
                aliases.insert(alias.to_string(), collection.to_string());
            }
        }
    }
    for (alias, collection) in &aliases {
        if !names.contains(collection) || names.contains(alias) {
            return Err(corrupt(format!(
                "alias `{alias}` of `{collection}` names no listed collection, or a \
                 collection's own name"
            )));
        }
    }
    Ok((names, aliases))
}

#[cfg(test)]
mod tests {
    use super::{apply, manifest_text, parse_manifest, AliasAction, Aliases};
    use crate::EngineError;

    fn create(alias: &str, collection: &str) -> AliasAction {
        AliasAction::Create {
            alias: alias.into(),
            collection: collection.into(),
        }
    }

    #[test]
    fn actions_apply_in_order_and_all_or_nothing() {
        let is_collection = |name: &str| name == "docs" || name == "docs-v2";
        let aliases = apply(
            &Aliases::new(),
            &[create("live", "docs")],
            is_collection,
            is_collection,
        )
        .unwrap();
        // re-pointing is a create; a rename keeps the collection; a delete of nothing is
        // a no-op
        let actions = [
            create("live", "docs-v2"),
            AliasAction::Rename {
                from: "live".into(),
                to: "prod".into(),
            },
            AliasAction::Delete {
                alias: "absent".into(),
            },
        ];
        let aliases = apply(&aliases, &actions, is_collection, is_collection).unwrap();
        assert_eq!(aliases.len(), 1);
        assert_eq!(aliases["prod"], "docs-v2");
        // a failing action leaves the map as it was
        let failing = [
            AliasAction::Delete {
                alias: "prod".into(),
            },
            create("x", "missing"),
        ];
        assert!(matches!(
            apply(&aliases, &failing, is_collection, is_collection),
            Err(EngineError::CollectionNotFound { .. })
        ));
        let rename_missing = [AliasAction::Rename {
            from: "nope".into(),
            to: "y".into(),
        }];
        assert!(matches!(
            apply(&aliases, &rename_missing, is_collection, is_collection),
            Err(EngineError::AliasNotFound { .. })
        ));
        for bad in [create("docs", "docs-v2"), create("has space", "docs")] {
            match apply(&aliases, &[bad], is_collection, is_collection) {
                Err(EngineError::NameInUse { reason }) => {
                    assert!(reason.contains("already exists") || reason.contains("alias_name"));
                }
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn manifest_round_trip_and_damage() {
        let mut aliases = Aliases::new();
        aliases.insert("live".into(), "b".into());
        let text = manifest_text(["a", "b"].into_iter(), &aliases);
        assert_eq!(text, "a\nb\nalias live b");
        let (names, parsed) = parse_manifest(&text).unwrap();
        assert_eq!(names, ["a", "b"]);
        assert_eq!(parsed, aliases);
        for bad in ["a\nalias live c", "a\nalias live", "a\nalias a a", "a b"] {
            assert!(
                matches!(parse_manifest(bad), Err(EngineError::Corrupt { .. })),
                "{bad:?}"
            );
        }
    }
}
