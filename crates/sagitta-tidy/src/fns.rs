//! Function lengths: each `fn` with a body, measured in lines from the line of its `fn`
//! keyword to the line of its closing brace (both included).

use crate::items::{enclosing_impl_or_trait, items, ItemKind};
use crate::lexer::code_tokens;

/// One function and its length.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FnLength {
    /// `Type::name` for a method (the `impl`'s self type or the trait), else `name`.
    pub name: String,
    /// Line of the `fn` keyword.
    pub line: usize,
    /// Lines from the `fn` keyword to the closing brace, both included.
    pub lines: usize,
}

/// Every function with a body in `source`, outside `#[cfg(test)]` modules (unit tests are
/// tests, which the length rule does not cover). Nested functions are listed on their own
/// and also count towards the function around them.
#[must_use]
pub fn function_lengths(source: &str) -> Vec<FnLength> {
    let tokens = code_tokens(source);
    let all = items(&tokens);
    let test_modules: Vec<_> = all
        .iter()
        .filter(|item| item.kind == (ItemKind::Mod { cfg_test: true }))
        .collect();
    all.iter()
        .filter(|item| item.kind == ItemKind::Fn)
        .filter(|item| {
            !test_modules
                .iter()
                .any(|module| module.contains(item.keyword))
        })
        .map(|item| {
            let name = match enclosing_impl_or_trait(&all, item.keyword) {
                Some(owner) if !owner.name.is_empty() => format!("{}::{}", owner.name, item.name),
                _ => item.name.clone(),
            };
            let line = tokens[item.keyword].line;
            FnLength {
                name,
                line,
                lines: tokens[item.close].line - line + 1,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::{function_lengths, FnLength};

    #[test]
    fn measures_from_fn_line_to_closing_brace() {
        let source = r#"
/// Docs do not count.
#[inline]
pub fn short() -> u8 {
    let brace = '}';
    let text = "}}} fn fake() {";
    // } a comment brace
    1
}

struct Foo;
impl<T> From<T> for Foo {
    fn from(_: T) -> Self {
        fn helper() {}
        Foo
    }
}

trait Bar {
    fn declared(&self);
    fn provided(&self) {
    }
}

#[cfg(test)]
mod tests {
    fn not_counted() {
    }
}
"#;
        let lengths = function_lengths(source);
        let expected = [
            FnLength {
                name: "short".into(),
                line: 4,
                lines: 6,
            },
            FnLength {
                name: "Foo::from".into(),
                line: 13,
                lines: 4,
            },
            FnLength {
                name: "Foo::helper".into(),
                line: 14,
                lines: 1,
            },
            FnLength {
                name: "Bar::provided".into(),
                line: 21,
                lines: 2,
            },
        ];
        assert_eq!(lengths, expected);
    }
}
