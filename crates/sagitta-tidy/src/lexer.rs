//! A small Rust lexer, just enough for the tidy rules: it tells code from comments, strings
//! and character literals, so that a rule looking for `unsafe` or `crate::x` never trips on
//! a doc comment or a string that mentions them. Identifiers and numbers are words;
//! every other character of code is a one-character punctuation token.

/// What a token is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// An identifier, keyword or number (`fn`, `crate`, `r#type`, `0x1f`).
    Word,
    /// One character of punctuation (`{`, `:`, `!`).
    Punct,
    /// A string, byte string, raw string or character literal, quotes included.
    Literal,
    /// A lifetime or loop label (`'a`).
    Lifetime,
    /// A line or block comment, doc comments included, delimiters included.
    Comment,
}

/// One token of a source file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Token<'a> {
    pub kind: Kind,
    pub text: &'a str,
    /// 1-based line of the token's first character.
    pub line: usize,
    /// 1-based line of the token's last character (differs for multi-line literals and
    /// block comments).
    pub end_line: usize,
}

impl Token<'_> {
    /// Whether this is code (not a comment).
    #[must_use]
    pub fn is_code(&self) -> bool {
        self.kind != Kind::Comment
    }

    /// Whether this is the word `word`.
    #[must_use]
    pub fn is_word(&self, word: &str) -> bool {
        self.kind == Kind::Word && self.text == word
    }

    /// Whether this is the punctuation character `punct`.
    #[must_use]
    pub fn is_punct(&self, punct: char) -> bool {
        self.kind == Kind::Punct
            && self.text.len() == punct.len_utf8()
            && self.text.starts_with(punct)
    }
}

fn is_word_byte(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || byte == b'_'
}

/// Splits `source` into tokens. Never fails: anything it does not understand becomes
/// punctuation, and an unterminated literal or comment runs to the end of the file.
#[must_use]
pub fn tokenize(source: &str) -> Vec<Token<'_>> {
    let mut lexer = Lexer {
        source,
        bytes: source.as_bytes(),
        position: 0,
        line: 1,
        tokens: Vec::new(),
    };
    lexer.run();
    lexer.tokens
}

/// Only the code tokens of `source` (comments dropped).
#[must_use]
pub fn code_tokens(source: &str) -> Vec<Token<'_>> {
    tokenize(source)
        .into_iter()
        .filter(Token::is_code)
        .collect()
}

struct Lexer<'a> {
    source: &'a str,
    bytes: &'a [u8],
    position: usize,
    line: usize,
    tokens: Vec<Token<'a>>,
}

impl<'a> Lexer<'a> {
    fn peek(&self, ahead: usize) -> u8 {
        self.bytes.get(self.position + ahead).copied().unwrap_or(0)
    }

    fn push(&mut self, kind: Kind, start: usize, start_line: usize) {
        let text = &self.source[start..self.position];
        self.tokens.push(Token {
            kind,
            text,
            line: start_line,
            end_line: self.line,
        });
    }

    /// Moves one byte forward, counting lines.
    fn advance(&mut self) {
        if self.peek(0) == b'\n' {
            self.line += 1;
        }
        self.position += 1;
    }

    fn run(&mut self) {
        while self.position < self.bytes.len() {
            let (start, start_line) = (self.position, self.line);
            let byte = self.peek(0);
            if byte.is_ascii_whitespace() {
                self.advance();
                continue;
            }
            let kind = if byte == b'/' && self.peek(1) == b'/' {
                self.line_comment()
            } else if byte == b'/' && self.peek(1) == b'*' {
                self.block_comment()
            } else if byte == b'"' {
                self.quoted(b'"')
            } else if byte == b'\'' {
                self.quote_or_lifetime()
            } else if is_word_byte(byte) {
                self.word_or_prefixed_literal()
            } else {
                // One character of punctuation (a whole UTF-8 sequence when not ASCII).
                let width = self.source[self.position..]
                    .chars()
                    .next()
                    .map_or(1, char::len_utf8);
                self.position += width;
                Kind::Punct
            };
            self.push(kind, start, start_line);
        }
    }

    fn line_comment(&mut self) -> Kind {
        while self.position < self.bytes.len() && self.peek(0) != b'\n' {
            self.position += 1;
        }
        Kind::Comment
    }

    /// `/* ... */`, nested as Rust nests them.
    fn block_comment(&mut self) -> Kind {
        self.position += 2;
        let mut depth = 1;
        while self.position < self.bytes.len() && depth > 0 {
            if self.peek(0) == b'/' && self.peek(1) == b'*' {
                depth += 1;
                self.position += 2;
            } else if self.peek(0) == b'*' && self.peek(1) == b'/' {
                depth -= 1;
                self.position += 2;
            } else {
                self.advance();
            }
        }
        Kind::Comment
    }

    /// A literal from the opening `quote` at the cursor to the closing one; backslash
    /// escapes the next byte.
    fn quoted(&mut self, quote: u8) -> Kind {
        self.position += 1;
        while self.position < self.bytes.len() {
            match self.peek(0) {
                b'\\' => {
                    self.position += 1;
                    self.advance();
                }
                byte if byte == quote => {
                    self.position += 1;
                    break;
                }
                _ => self.advance(),
            }
        }
        Kind::Literal
    }

    /// `'x'`, `'\n'`, `'\u{1f}'` are characters; `'a` and `'outer:` are lifetimes/labels.
    fn quote_or_lifetime(&mut self) -> Kind {
        if self.peek(1) == b'\\' {
            return self.quoted(b'\'');
        }
        let width = self.source[self.position + 1..]
            .chars()
            .next()
            .map_or(1, char::len_utf8);
        if self.peek(1 + width) == b'\'' {
            self.position += 2 + width;
            return Kind::Literal;
        }
        self.position += 1;
        while is_word_byte(self.peek(0)) {
            self.position += 1;
        }
        Kind::Lifetime
    }

    /// A word; or, when the word is a literal prefix (`b`, `r`, `br`, `c`, `cr`) right
    /// before a quote or `#"`, the whole prefixed literal. Numbers keep their fraction
    /// (`1.5`) but not a following range (`0..4`).
    fn word_or_prefixed_literal(&mut self) -> Kind {
        let start = self.position;
        while is_word_byte(self.peek(0))
            || (self.peek(0) == b'.'
                && self.bytes[start].is_ascii_digit()
                && self.peek(1).is_ascii_digit())
        {
            self.position += 1;
        }
        let word = &self.source[start..self.position];
        let next = self.peek(0);
        match word {
            "b" | "c" if next == b'"' => self.quoted(b'"'),
            "b" if next == b'\'' => self.quoted(b'\''),
            "r" | "br" | "cr" if next == b'"' || (next == b'#' && self.raw_string_ahead()) => {
                self.raw_string()
            }
            _ => Kind::Word,
        }
    }

    /// Whether `#...#"` follows the cursor (a raw string, not `r#ident`).
    fn raw_string_ahead(&self) -> bool {
        let mut ahead = 0;
        while self.peek(ahead) == b'#' {
            ahead += 1;
        }
        self.peek(ahead) == b'"'
    }

    /// `#*"..."#*` with the cursor on the first `#` or the quote.
    fn raw_string(&mut self) -> Kind {
        let mut hashes = 0;
        while self.peek(0) == b'#' {
            hashes += 1;
            self.position += 1;
        }
        self.position += 1; // the opening quote
        while self.position < self.bytes.len() {
            if self.peek(0) == b'"' && (1..=hashes).all(|offset| self.peek(offset) == b'#') {
                self.position += 1 + hashes;
                break;
            }
            self.advance();
        }
        Kind::Literal
    }
}

#[cfg(test)]
mod tests {
    use super::{code_tokens, tokenize, Kind};

    #[test]
    fn comments_strings_and_characters_are_not_code() {
        let source = "let a = \"unsafe { }\"; // unsafe\n/* unsafe /* nested */ */ let b = '{';\n\
                      let c = r#\"unsafe\"#; let d = b'}'; fn f<'a>(x: &'a str) {}";
        let words: Vec<&str> = code_tokens(source)
            .iter()
            .filter(|token| token.kind == Kind::Word)
            .map(|token| token.text)
            .collect();
        assert_eq!(
            words,
            ["let", "a", "let", "b", "let", "c", "let", "d", "fn", "f", "x", "str"]
        );
        let comments = tokenize(source)
            .iter()
            .filter(|token| token.kind == Kind::Comment)
            .count();
        assert_eq!(comments, 2);
    }

    #[test]
    fn lines_count_through_multi_line_literals() {
        let tokens = tokenize("let s = \"a\nb\";\nfn g() {}");
        let fn_token = tokens.iter().find(|token| token.is_word("fn")).unwrap();
        assert_eq!(fn_token.line, 3);
        let literal = tokens
            .iter()
            .find(|token| token.kind == Kind::Literal)
            .unwrap();
        assert_eq!((literal.line, literal.end_line), (1, 2));
    }

    #[test]
    fn ranges_are_not_fractions() {
        let texts: Vec<&str> = code_tokens("0..4 1.5")
            .iter()
            .map(|token| token.text)
            .collect();
        assert_eq!(texts, ["0", ".", ".", "4", "1.5"]);
    }
}
