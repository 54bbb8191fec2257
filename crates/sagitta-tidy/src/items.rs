//! Items found by brace matching over code tokens: functions with bodies, `impl` and
//! `trait` blocks, inline modules. Enough structure for the tidy rules, no more: no macro
//! expansion, no name resolution.

use crate::lexer::Token;

/// What opened a block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ItemKind {
    /// `fn name(...) { ... }`.
    Fn,
    /// `impl ... { ... }`; `trait_impl` when it is `impl Trait for Type`. The item's name
    /// is the self type's last path segment (`impl<T> a::Foo<T> for Bar<T>` → `Bar`).
    Impl { trait_impl: bool },
    /// `trait Name { ... }`.
    Trait,
    /// `mod name { ... }` written inline; `cfg_test` when an attribute `#[cfg(test)]` is on it.
    Mod { cfg_test: bool },
}

/// One item with a body: token indices of its keyword and of its braces.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Item {
    pub kind: ItemKind,
    pub name: String,
    /// Index of the item's keyword (`fn`, `impl`, `trait`, `mod`).
    pub keyword: usize,
    pub open: usize,
    pub close: usize,
}

impl Item {
    /// Whether token `index` lies inside the item's braces.
    #[must_use]
    pub fn contains(&self, index: usize) -> bool {
        self.open < index && index < self.close
    }
}

/// For each token, the index of its matching brace (for `{` and `}`), else `usize::MAX`.
/// Unbalanced braces match nothing.
#[must_use]
pub fn matching_braces(tokens: &[Token<'_>]) -> Vec<usize> {
    let mut matches = vec![usize::MAX; tokens.len()];
    let mut open = Vec::new();
    for (index, token) in tokens.iter().enumerate() {
        if token.is_punct('{') {
            open.push(index);
        } else if token.is_punct('}') {
            if let Some(opener) = open.pop() {
                matches[opener] = index;
                matches[index] = opener;
            }
        }
    }
    matches
}

/// Every `fn`, `impl`, `trait` and inline `mod` with a body, in source order.
/// `tokens` must be code tokens only (see [`crate::lexer::code_tokens`]).
#[must_use]
pub fn items(tokens: &[Token<'_>]) -> Vec<Item> {
    let matches = matching_braces(tokens);
    let mut found = Vec::new();
    for (index, token) in tokens.iter().enumerate() {
        let next_word = tokens
            .get(index + 1)
            .filter(|next| next.kind == crate::lexer::Kind::Word);
        let (kind, name) = if token.is_word("fn") {
            let Some(name) = next_word else { continue };
            (ItemKind::Fn, name.text.to_owned())
        } else if token.is_word("trait") && item_position(tokens, index) {
            let Some(name) = next_word else { continue };
            (ItemKind::Trait, name.text.to_owned())
        } else if token.is_word("mod") {
            let Some(name) = next_word else { continue };
            (
                ItemKind::Mod {
                    cfg_test: cfg_test_before(tokens, index),
                },
                name.text.to_owned(),
            )
        } else if token.is_word("impl") && item_position(tokens, index) {
            let (name, trait_impl) = impl_header(tokens, index);
            (ItemKind::Impl { trait_impl }, name)
        } else {
            continue;
        };
        let Some(open) = body_open(tokens, index) else {
            continue;
        };
        if matches[open] != usize::MAX {
            found.push(Item {
                kind,
                name,
                keyword: index,
                open,
                close: matches[open],
            });
        }
    }
    found
}

/// Whether the keyword at `index` starts an item (rather than `impl Trait` in a type):
/// after `}`, `;`, `{`, an attribute's `]`, a visibility, `unsafe`, or at the start.
fn item_position(tokens: &[Token<'_>], index: usize) -> bool {
    let mut before = index;
    while before > 0 {
        before -= 1;
        let token = &tokens[before];
        if ["unsafe", "default", "auto", "pub"]
            .iter()
            .any(|word| token.is_word(word))
        {
            continue;
        }
        if token.is_punct(')') {
            // `pub(crate)`: skip back over the visibility's parentheses.
            let Some(open) = tokens[..before]
                .iter()
                .rposition(|token| token.is_punct('('))
            else {
                return false;
            };
            if open > 0 && tokens[open - 1].is_word("pub") {
                before = open;
                continue;
            }
            return false;
        }
        return token.is_punct('}')
            || token.is_punct(';')
            || token.is_punct('{')
            || token.is_punct(']');
    }
    true
}

/// Whether `#[cfg(test)]` is among the attributes right before the keyword at `index`.
fn cfg_test_before(tokens: &[Token<'_>], index: usize) -> bool {
    let mut end = index;
    while end > 0 && ["pub", "crate", "(", ")"].contains(&tokens[end - 1].text) {
        end -= 1;
    }
    // Walk back over whole attributes `# [ ... ]`.
    while end > 0 && tokens[end - 1].is_punct(']') {
        let Some(hash) = tokens[..end].iter().rposition(|token| token.is_punct('#')) else {
            return false;
        };
        let attribute: Vec<&str> = tokens[hash..end].iter().map(|token| token.text).collect();
        if attribute == ["#", "[", "cfg", "(", "test", ")", "]"] {
            return true;
        }
        end = hash;
    }
    false
}

/// The self type's name and whether it is a trait impl, for the `impl` at `index`.
fn impl_header(tokens: &[Token<'_>], index: usize) -> (String, bool) {
    let mut angle_depth = 0usize;
    let mut last_word = String::new();
    let mut trait_impl = false;
    let mut position = index + 1;
    while let Some(token) = tokens.get(position) {
        if token.is_punct('{')
            || token.is_punct(';')
            || (angle_depth == 0 && token.is_word("where"))
        {
            break;
        }
        if token.is_punct('<') {
            angle_depth += 1;
        } else if token.is_punct('>') && !tokens[position - 1].is_punct('-') {
            angle_depth = angle_depth.saturating_sub(1);
        } else if angle_depth == 0
            && token.is_word("for")
            && !tokens
                .get(position + 1)
                .is_some_and(|next| next.is_punct('<'))
        {
            trait_impl = true;
        } else if angle_depth == 0
            && token.kind == crate::lexer::Kind::Word
            && !["dyn", "mut"].contains(&token.text)
        {
            last_word = token.text.to_owned();
        }
        position += 1;
    }
    (last_word, trait_impl)
}

/// The `{` opening the body of the item whose keyword is at `index`: the first `{` outside
/// parentheses and brackets, unless a `;` comes first (a declaration without a body).
fn body_open(tokens: &[Token<'_>], index: usize) -> Option<usize> {
    let mut depth = 0usize;
    for (position, token) in tokens.iter().enumerate().skip(index + 1) {
        match token.text {
            "(" | "[" => depth += 1,
            ")" | "]" => depth = depth.saturating_sub(1),
            "{" if depth == 0 => return Some(position),
            ";" if depth == 0 => return None,
            _ => {}
        }
    }
    None
}

/// The innermost `impl` or `trait` item containing token `index`, if any.
#[must_use]
pub fn enclosing_impl_or_trait(items: &[Item], index: usize) -> Option<&Item> {
    items
        .iter()
        .filter(|item| {
            matches!(item.kind, ItemKind::Impl { .. } | ItemKind::Trait) && item.contains(index)
        })
        .min_by_key(|item| item.close - item.open)
}
