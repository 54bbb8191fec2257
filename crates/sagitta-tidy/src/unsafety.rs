//! Every use of the `unsafe` keyword in code, and whether it is justified in the way the
//! kernels crate does it: a `// SAFETY:` comment right above an `unsafe` block or
//! `unsafe impl` (on the same statement: the comment may sit above a `let x =` whose value
//! starts on the next line), and a `# Safety` section in the docs of an `unsafe fn` or
//! `unsafe trait` declaration. An `unsafe fn` in a trait impl follows the trait's contract.

use crate::items::{enclosing_impl_or_trait, items, ItemKind};
use crate::lexer::code_tokens;

/// What the `unsafe` keyword introduces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnsafeKind {
    Block,
    Fn,
    Impl,
    Trait,
    /// Anything else (`#[unsafe(no_mangle)]`, `unsafe extern` blocks).
    Other,
}

/// One `unsafe` keyword.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnsafeUse {
    pub kind: UnsafeKind,
    pub line: usize,
    /// Whether the justification this kind needs is there (see the module docs).
    pub justified: bool,
}

/// Every `unsafe` keyword in the code of `source` (not in comments or strings).
#[must_use]
pub fn unsafe_uses(source: &str) -> Vec<UnsafeUse> {
    let tokens = code_tokens(source);
    let all = items(&tokens);
    let lines: Vec<&str> = source.lines().collect();
    let mut uses = Vec::new();
    for (index, token) in tokens.iter().enumerate() {
        if !token.is_word("unsafe") {
            continue;
        }
        let mut next = index + 1;
        while tokens
            .get(next)
            .is_some_and(|next| next.is_word("extern") || next.kind == crate::lexer::Kind::Literal)
        {
            next += 1;
        }
        let kind = match tokens.get(next) {
            Some(next) if next.is_punct('{') && !tokens[index + 1].is_word("extern") => {
                UnsafeKind::Block
            }
            Some(next) if next.is_word("fn") => UnsafeKind::Fn,
            Some(next) if next.is_word("impl") => UnsafeKind::Impl,
            Some(next) if next.is_word("trait") => UnsafeKind::Trait,
            _ => UnsafeKind::Other,
        };
        let justified = match kind {
            UnsafeKind::Fn if in_trait_impl(&all, index) => true,
            UnsafeKind::Fn | UnsafeKind::Trait => has_safety_docs(&lines, token.line),
            UnsafeKind::Block | UnsafeKind::Impl | UnsafeKind::Other => {
                has_safety_comment(&lines, token.line)
            }
        };
        uses.push(UnsafeUse {
            kind,
            line: token.line,
            justified,
        });
    }
    uses
}

fn in_trait_impl(all: &[crate::items::Item], index: usize) -> bool {
    enclosing_impl_or_trait(all, index)
        .is_some_and(|owner| owner.kind == ItemKind::Impl { trait_impl: true })
}

/// Whether a comment containing `SAFETY:` is on `line` (1-based) or directly above the
/// statement that contains it: walking up from `line`, lines that continue a statement
/// (not ending in `;`, `{`, `}` or `,`) are passed over, and the first comment lines met
/// must include `SAFETY:`.
#[must_use]
pub fn has_safety_comment(lines: &[&str], line: usize) -> bool {
    let Some(own) = lines.get(line - 1) else {
        return false;
    };
    if own.contains("// SAFETY:") {
        return true;
    }
    let mut above = line - 1;
    let mut continuation_lines = 0;
    while above > 0 {
        let text = lines[above - 1].trim();
        if text.starts_with("//") {
            // The comment block right above: one of its lines must say SAFETY.
            while above > 0 && lines[above - 1].trim().starts_with("//") {
                if lines[above - 1].contains("SAFETY:") {
                    return true;
                }
                above -= 1;
            }
            return false;
        }
        let ends_statement =
            text.is_empty() || [';', '{', '}', ','].iter().any(|end| text.ends_with(*end));
        continuation_lines += 1;
        if ends_statement || continuation_lines > 3 {
            return false;
        }
        above -= 1;
    }
    false
}

/// Whether the doc comment of the item declared on `line` (1-based) has a `# Safety`
/// section. Attributes and the docs themselves are walked over upwards.
#[must_use]
pub fn has_safety_docs(lines: &[&str], line: usize) -> bool {
    let mut above = line - 1;
    while above > 0 {
        let text = lines[above - 1].trim();
        if text == "/// # Safety" || text == "//! # Safety" {
            return true;
        }
        let attribute_or_doc =
            text.starts_with("///") || text.starts_with("#[") || text.ends_with(")]");
        if !attribute_or_doc {
            return false;
        }
        above -= 1;
    }
    false
}

#[cfg(test)]
mod tests {
    use super::{unsafe_uses, UnsafeKind};

    #[test]
    fn finds_each_kind_and_its_justification() {
        let source = r#"
// "unsafe" in a comment is not code.
fn a() {
    // SAFETY: explained.
    let x =
        unsafe { f() };
    let y = unsafe { g() };
}

/// Does it.
///
/// # Safety
/// The caller checks.
#[inline]
unsafe fn documented() {}

/// No safety section.
unsafe fn undocumented() {}

// SAFETY: zero is fine.
unsafe impl Send for Foo {}
unsafe impl Sync for Foo {}

impl Widen for f32 {
    unsafe fn load() {}
}
"#;
        let found: Vec<(UnsafeKind, usize, bool)> = unsafe_uses(source)
            .iter()
            .map(|found| (found.kind, found.line, found.justified))
            .collect();
        let expected = [
            (UnsafeKind::Block, 6, true),
            (UnsafeKind::Block, 7, false),
            (UnsafeKind::Fn, 15, true),
            (UnsafeKind::Fn, 18, false),
            (UnsafeKind::Impl, 21, true),
            (UnsafeKind::Impl, 22, false),
            (UnsafeKind::Fn, 25, true),
        ];
        assert_eq!(found, expected);
    }
}
