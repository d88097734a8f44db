//! The errors stages 1–4 return. Each message names the problem and how to fix it, in one line.

/// What can go wrong in stages 1–4.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Writing a stage's output failed (a closed pipe, a full disk).
    #[error("cannot write the output: {0}")]
    Io(#[from] std::io::Error),
    /// A causal layer's mask is built for `context_length` tokens; a longer input has no mask rows.
    #[error(
        "the input has {tokens} tokens but the layer's context_length is {context_length}; \
         pass at most {context_length} tokens or build the layer with a longer context_length"
    )]
    ContextTooLong {
        tokens: usize,
        context_length: usize,
    },
    /// Multi-head attention splits `d_out` evenly into `num_heads` heads.
    #[error(
        "d_out ({d_out}) is not divisible by num_heads ({num_heads}); \
         choose a d_out that is a multiple of num_heads"
    )]
    HeadsDontDivide { d_out: usize, num_heads: usize },
    /// Stage 1's query is one of the sentence's tokens.
    #[error(
        "query {query} is not a token of the sentence; choose 0 to {} (0 is \"Your\")",
        tokens - 1
    )]
    QueryOutOfRange { query: usize, tokens: usize },
    /// `nn.Dropout(p)` drops with a probability.
    #[error("the dropout rate {p} is out of range; use a probability from 0 to 1")]
    DropoutOutOfRange { p: f64 },
}
