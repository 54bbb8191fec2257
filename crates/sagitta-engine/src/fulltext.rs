//! Full-text matching for fields with a text index (Qdrant's `text` payload index): how a
//! string is cut into tokens, and whether a string holds a query's tokens.
//!
//! Without a text index a `match.text` is a substring test (see [`crate::filter`]); once a
//! field has one, `text`, `text_any` and `phrase` on it compare tokens, as Qdrant's server
//! does: `text` holds when the string has every query token, `text_any` when it has one,
//! `phrase` when the tokens follow one another in order (only on an index made with
//! `phrase_matching`). A query whose text leaves no token matches nothing.
//!
//! Tokenizers: `word` cuts at every character that is not a letter or a digit,
//! `whitespace` at white space, `prefix` cuts as `word` and lets a query token match any
//! word it begins (the index keeps every prefix of a word from `min_token_len` to
//! `max_token_len` characters). Tokens are lowercased unless `lowercase` is false; for
//! `word` and `whitespace`, tokens shorter than `min_token_len` or longer than
//! `max_token_len` characters are left out on both sides; for `prefix`, words shorter
//! than `min_token_len` are left out and a query token is cut to `max_token_len`.

use std::collections::HashSet;

/// How a text index cuts strings.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize,
)]
pub enum Tokenizer {
    #[default]
    Word,
    Whitespace,
    Prefix,
}

impl Tokenizer {
    pub fn name(self) -> &'static str {
        match self {
            Tokenizer::Word => "word",
            Tokenizer::Whitespace => "whitespace",
            Tokenizer::Prefix => "prefix",
        }
    }

    /// Qdrant's names for the tokenizers this build has (`multilingual` is not one).
    pub fn parse(name: &str) -> Option<Tokenizer> {
        [Tokenizer::Word, Tokenizer::Whitespace, Tokenizer::Prefix]
            .into_iter()
            .find(|tokenizer| tokenizer.name() == name)
    }

    pub(crate) fn code(self) -> u8 {
        match self {
            Tokenizer::Word => 0,
            Tokenizer::Whitespace => 1,
            Tokenizer::Prefix => 2,
        }
    }

    pub(crate) fn from_code(code: u8) -> Option<Tokenizer> {
        [Tokenizer::Word, Tokenizer::Whitespace, Tokenizer::Prefix]
            .into_iter()
            .find(|tokenizer| tokenizer.code() == code)
    }
}

/// The settings of a text index.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct TextIndex {
    pub tokenizer: Tokenizer,
    pub lowercase: bool,
    /// Fewest characters a token has (`None`: no bound).
    pub min_token_len: Option<u16>,
    /// Most characters a token has (`None`: no bound).
    pub max_token_len: Option<u16>,
    /// Whether `phrase` queries may use the index.
    pub phrase_matching: bool,
}

impl Default for TextIndex {
    fn default() -> TextIndex {
        TextIndex {
            tokenizer: Tokenizer::Word,
            lowercase: true,
            min_token_len: None,
            max_token_len: None,
            phrase_matching: false,
        }
    }
}

/// How a query's tokens must appear.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum TextMode {
    /// `match.text`: every token.
    All,
    /// `match.text_any`: one token.
    Any,
    /// `match.phrase`: the tokens one after another.
    Phrase,
}

/// A `match.text` / `text_any` / `phrase` on a field with a text index, its text cut as
/// the index cuts queries.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TextQuery {
    pub index: TextIndex,
    pub mode: TextMode,
    pub tokens: Vec<String>,
}

impl TextIndex {
    /// Why these settings cannot make an index, if they cannot.
    pub fn check(&self) -> Result<(), String> {
        if self.min_token_len == Some(0) || self.max_token_len == Some(0) {
            return Err("min_token_len and max_token_len must be at least 1".to_string());
        }
        if let (Some(min), Some(max)) = (self.min_token_len, self.max_token_len) {
            if min > max {
                return Err(format!(
                    "min_token_len ({min}) is more than max_token_len ({max})"
                ));
            }
        }
        Ok(())
    }

    fn too_short(&self, word: &str) -> bool {
        self.min_token_len
            .is_some_and(|min| word.chars().count() < usize::from(min))
    }

    fn too_long(&self, word: &str) -> bool {
        self.max_token_len
            .is_some_and(|max| word.chars().count() > usize::from(max))
    }

    /// The words of `text` in order, lowercased if asked, those the length bounds leave
    /// out dropped.
    pub(crate) fn words(&self, text: &str) -> Vec<String> {
        let pieces: Box<dyn Iterator<Item = &str>> = match self.tokenizer {
            Tokenizer::Whitespace => Box::new(text.split_whitespace()),
            Tokenizer::Word | Tokenizer::Prefix => {
                Box::new(text.split(|c: char| !c.is_alphanumeric()))
            }
        };
        pieces
            .filter(|piece| !piece.is_empty())
            .map(|piece| {
                if self.lowercase {
                    piece.to_lowercase()
                } else {
                    piece.to_string()
                }
            })
            .filter(|word| {
                !self.too_short(word)
                    && (self.tokenizer == Tokenizer::Prefix || !self.too_long(word))
            })
            .collect()
    }

    /// The tokens an index keeps for `text`: its words, or for `prefix` every prefix of a
    /// word within the length bounds (repeats possible).
    pub(crate) fn document_tokens(&self, text: &str, out: &mut Vec<String>) {
        for word in self.words(text) {
            if self.tokenizer != Tokenizer::Prefix {
                out.push(word);
                continue;
            }
            let shortest = usize::from(self.min_token_len.unwrap_or(1));
            let longest = self.max_token_len.map_or(usize::MAX, usize::from);
            let mut prefix = String::new();
            for (count, c) in word.chars().enumerate() {
                if count >= longest {
                    break;
                }
                prefix.push(c);
                if count + 1 >= shortest {
                    out.push(prefix.clone());
                }
            }
        }
    }

    /// The tokens of a query's text: its words, cut to `max_token_len` for `prefix`.
    pub fn query(&self, text: &str, mode: TextMode) -> TextQuery {
        let mut tokens = self.words(text);
        if let (Tokenizer::Prefix, Some(max)) = (self.tokenizer, self.max_token_len) {
            for token in &mut tokens {
                *token = token.chars().take(usize::from(max)).collect();
            }
        }
        TextQuery {
            index: *self,
            mode,
            tokens,
        }
    }
}

impl TextQuery {
    /// Whether the document word `word` is the query token `token` (or, for `prefix`,
    /// begins with it).
    fn word_is(&self, word: &str, token: &str) -> bool {
        match self.index.tokenizer {
            Tokenizer::Prefix => word.starts_with(token),
            Tokenizer::Word | Tokenizer::Whitespace => word == token,
        }
    }

    /// Whether the string `text` holds the query.
    pub fn matches(&self, text: &str) -> bool {
        if self.tokens.is_empty() {
            return false;
        }
        let words = self.index.words(text);
        match self.mode {
            TextMode::All | TextMode::Any if self.index.tokenizer != Tokenizer::Prefix => {
                let set: HashSet<&str> = words.iter().map(String::as_str).collect();
                let has = |token: &String| set.contains(token.as_str());
                if self.mode == TextMode::All {
                    self.tokens.iter().all(has)
                } else {
                    self.tokens.iter().any(has)
                }
            }
            TextMode::All => self
                .tokens
                .iter()
                .all(|token| words.iter().any(|word| self.word_is(word, token))),
            TextMode::Any => self
                .tokens
                .iter()
                .any(|token| words.iter().any(|word| self.word_is(word, token))),
            TextMode::Phrase => words.windows(self.tokens.len()).any(|window| {
                window
                    .iter()
                    .zip(&self.tokens)
                    .all(|(word, token)| self.word_is(word, token))
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn index(tokenizer: Tokenizer) -> TextIndex {
        TextIndex {
            tokenizer,
            ..TextIndex::default()
        }
    }

    #[test]
    fn word_tokens_cut_at_punctuation_and_are_lowercased() {
        let words = index(Tokenizer::Word).words("Hello, World-wide web!");
        assert_eq!(words, ["hello", "world", "wide", "web"]);
        let kept = TextIndex {
            lowercase: false,
            ..index(Tokenizer::Whitespace)
        };
        assert_eq!(kept.words("Hello, World-wide"), ["Hello,", "World-wide"]);
    }

    #[test]
    fn length_bounds_drop_tokens_on_both_sides() {
        let bounded = TextIndex {
            min_token_len: Some(3),
            max_token_len: Some(5),
            ..index(Tokenizer::Word)
        };
        assert_eq!(bounded.words("a cat catapult tiger"), ["cat", "tiger"]);
        let query = bounded.query("an old cat", TextMode::All);
        assert_eq!(query.tokens, ["old", "cat"]);
        assert!(query.matches("the cat is old"));
        assert!(!query.matches("the cat is young"));
    }

    #[test]
    fn modes_all_any_and_phrase() {
        let ix = TextIndex {
            phrase_matching: true,
            ..index(Tokenizer::Word)
        };
        let doc = "The quick brown fox";
        assert!(ix.query("fox quick", TextMode::All).matches(doc));
        assert!(!ix.query("fox lazy", TextMode::All).matches(doc));
        assert!(ix.query("fox lazy", TextMode::Any).matches(doc));
        assert!(ix.query("quick brown", TextMode::Phrase).matches(doc));
        assert!(!ix.query("brown quick", TextMode::Phrase).matches(doc));
        // a substring of a word is not a token
        assert!(!ix.query("row", TextMode::All).matches(doc));
        // no token left: nothing matches
        assert!(!ix.query("  ,, ", TextMode::Any).matches(doc));
    }

    #[test]
    fn prefix_tokens_match_the_words_they_begin() {
        let ix = TextIndex {
            min_token_len: Some(2),
            max_token_len: Some(4),
            ..index(Tokenizer::Prefix)
        };
        let mut tokens = Vec::new();
        ix.document_tokens("Vector db", &mut tokens);
        assert_eq!(tokens, ["ve", "vec", "vect", "db"]);
        assert!(ix.query("vec", TextMode::All).matches("Vectors everywhere"));
        // cut to max_token_len: "vectorised" becomes "vect"
        assert!(ix.query("vectorised", TextMode::All).matches("vectors"));
        assert!(!ix.query("ect", TextMode::All).matches("vectors"));
    }

    #[test]
    fn settings_are_checked() {
        let bad = TextIndex {
            min_token_len: Some(5),
            max_token_len: Some(2),
            ..TextIndex::default()
        };
        assert!(bad.check().unwrap_err().contains("min_token_len"));
        let zero = TextIndex {
            max_token_len: Some(0),
            ..TextIndex::default()
        };
        assert!(zero.check().is_err());
        assert!(TextIndex::default().check().is_ok());
    }
}
