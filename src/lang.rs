//! The book's two editions, English and Chinese (`book/po/zh-CN.po`). The tables and pictures the
//! crate generates for the book are drawn once per edition, from the same numbers, in the edition's
//! words; the Chinese copies live in a `zh-CN/` folder beside the English ones.

/// An edition of the book.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lang {
    En,
    ZhCn,
}

impl Lang {
    /// Both editions, English first.
    pub const ALL: [Lang; 2] = [Lang::En, Lang::ZhCn];

    /// The folder of this edition's copies under `book/src/generated/` and `book/src/img/`: none for
    /// English, `zh-CN/` for Chinese.
    pub fn dir(self) -> &'static str {
        match self {
            Lang::En => "",
            Lang::ZhCn => "zh-CN/",
        }
    }

    /// `en` in the English edition, `zh` in the Chinese one: each generated word written beside its
    /// translation.
    pub fn pick<'a>(self, en: &'a str, zh: &'a str) -> &'a str {
        match self {
            Lang::En => en,
            Lang::ZhCn => zh,
        }
    }
}
