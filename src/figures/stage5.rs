//! The pictures of stage 5 (the tutorial's GPT), drawn from the crate's own numbers: the model as a
//! block diagram beside the full block of the next chapter, every arrow labelled with the shape a
//! forward pass records on the tape; and the tape of a small expression, each node with its value
//! and its gradient after `backward`.

use super::Figure;
use super::draw::{
    BLUE, GREY, ORANGE, RED, Tag, arrow, arrowhead, dot, legend_label, open_svg, polyline, rect,
    rounded, sized, text, thousands, vertical_text,
};
use super::finish;
use crate::Error;
use crate::lang::Lang;
use crate::rng::numpy::NumpyRandom;
use crate::s5_gpt::backend::Op;
use crate::s5_gpt::beyond::{Architecture, Gpt, GptConfig, dropout_masks};
use crate::s5_gpt::data::CharDataset;
use crate::s5_gpt::model::TutorialGpt;
use crate::s5_gpt::train::Recipe;
use crate::s5_gpt::{NodeId, Tape, Tensor};

/// This stage's pictures in `lang`'s words.
pub fn figures(lang: Lang) -> Result<Vec<Figure>, Error> {
    Ok(vec![model_figure(lang), tape_figure(lang)])
}

/// The ink of what explains the boxes (shapes, sizes, counts): a step back from black.
const DIM: &str = "#333333";
/// The head of every arrow here: (length, half width).
const HEAD: (f64, f64) = (7.0, 3.5);
/// The fill of a box of the tutorial's model, and of one the full block adds.
const BLUE_FILL: &str = "#deebf7";
const ORANGE_FILL: &str = "#fee6ce";

/// Tiny Shakespeare's 65 symbols in code-point order, as `data.rs` lists them: the corpus's
/// vocabulary, so that the picture needs no download.
const TINY_SHAKESPEARE_VOCAB: &str =
    "\n !$&',-.3:;?ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// A shape as the code comments write it: `(4, 32, 64)`, or `()` for a scalar.
fn shape_text(shape: &[usize]) -> String {
    let dims: Vec<String> = shape.iter().map(usize::to_string).collect();
    format!("({})", dims.join(", "))
}

/// A box of fixed size centred on `cx`, top at `y`, with one line of text in it.
fn text_box(
    svg: &mut String,
    cx: f64,
    y: f64,
    size: (f64, f64),
    colours: (&str, &str),
    words: &str,
) {
    let (w, h) = size;
    let (stroke, fill) = colours;
    rounded(svg, (cx - w / 2.0, y), (w, h), stroke, fill);
    text(svg, (cx, y + h / 2.0 + 4.5), "middle", 12, "black", words);
}

// ---------------------------------------------------------------------------------------------
// The model and the full block.

/// The shapes a forward pass recorded, by kind of operation, in tape order.
struct Recorded<'a> {
    tape: &'a Tape,
}

impl Recorded<'_> {
    /// The shape of the `n`-th node (from 0) whose op `kind` accepts.
    fn nth(&self, kind: fn(&Op) -> bool, n: usize) -> Vec<usize> {
        (0..self.tape.len())
            .map(NodeId)
            .filter(|&id| kind(self.tape.op(id)))
            .nth(n)
            .map(|id| self.tape.value(id).shape.clone())
            .expect("the forward pass recorded this node")
    }
}

fn is_add(op: &Op) -> bool {
    matches!(op, Op::Add { .. })
}
fn is_matmul(op: &Op) -> bool {
    matches!(op, Op::MatMul { .. })
}
fn is_softmax(op: &Op) -> bool {
    matches!(op, Op::Softmax { .. })
}
fn is_linear(op: &Op) -> bool {
    matches!(op, Op::Linear { .. })
}
fn is_gelu(op: &Op) -> bool {
    matches!(op, Op::Gelu { .. })
}
fn is_layer_norm(op: &Op) -> bool {
    matches!(op, Op::LayerNorm { .. })
}
fn is_split(op: &Op) -> bool {
    matches!(op, Op::SplitHeads { .. })
}
fn is_merge(op: &Op) -> bool {
    matches!(op, Op::MergeHeads { .. })
}
fn is_dropout(op: &Op) -> bool {
    matches!(op, Op::Dropout { .. })
}
fn is_loss(op: &Op) -> bool {
    matches!(op, Op::CrossEntropy { .. })
}

/// One box of a column and the shape on the arrow that leaves it; `added` marks what the
/// tutorial's model leaves out.
struct Step {
    text: String,
    shape: Vec<usize>,
    added: bool,
}

fn step(text: &str, shape: Vec<usize>, added: bool) -> Step {
    Step {
        text: text.to_string(),
        shape,
        added,
    }
}

/// The sizes of the chapter's run: `Recipe::default()`, and Tiny Shakespeare's vocabulary.
pub(crate) fn chapter_config(architecture: Architecture) -> (usize, GptConfig) {
    let recipe = Recipe::default();
    let vocab = CharDataset::from_vocab(TINY_SHAKESPEARE_VOCAB.chars().collect());
    let config = GptConfig {
        vocab_size: vocab.vocab_size(),
        context_size: recipe.context_size,
        embedding_size: recipe.embedding_size,
        blocks: recipe.blocks,
        architecture,
    };
    (recipe.batch_size, config)
}

/// The tutorial's model at the chapter's sizes, its forward pass and loss on one batch of token 0
/// recorded on `tape`. Returns the model.
fn tutorial_pass(tape: &mut Tape) -> (usize, GptConfig) {
    let (b, config) = chapter_config(Architecture::default());
    let mut rng = NumpyRandom::seed(Recipe::default().seed);
    let sizes = [
        config.vocab_size,
        config.context_size,
        config.embedding_size,
        config.blocks,
    ];
    let model = TutorialGpt::new(tape, &mut rng, sizes);
    let ids = vec![0; b * config.context_size];
    let logits = model.forward(tape, &ids, b);
    tape.cross_entropy(logits, &ids);
    (b, config)
}

/// The full model of the next chapter's table (its last row: every addition, and dropout), its
/// forward pass while training recorded on `tape`. Returns its flags and config.
fn full_pass(tape: &mut Tape) -> (String, GptConfig) {
    let full = Architecture::everything(4, 0.1);
    let flags = "--heads 4 --residual --layer-norm --dropout 0.1";
    let (b, config) = chapter_config(full);
    let seed = Recipe::default().seed;
    let model = Gpt::new(tape, &mut NumpyRandom::seed(seed), config);
    let ids = vec![0; b * config.context_size];
    let mut masks = dropout_masks(seed, 0);
    model.forward(tape, &ids, b, Some(&mut masks));
    (flags.to_string(), config)
}

/// The boxes of the tutorial's whole model, from its recorded forward pass. The boxes between
/// `BLOCK.0` and `BLOCK.1` (excluded) are one block.
fn tutorial_steps(lang: Lang, r: &Recorded, ids: Vec<usize>) -> Vec<Step> {
    vec![
        step(lang.pick("token ids", "词元编号"), ids, false),
        step(
            lang.pick("token + position embedding", "词元嵌入 + 位置嵌入"),
            r.nth(is_add, 0),
            false,
        ),
        step(
            lang.pick(
                "weights A = softmax(mask(XXᵀ/√C))",
                "权重 A = softmax(mask(XXᵀ/√C))",
            ),
            r.nth(is_softmax, 0),
            false,
        ),
        step(
            lang.pick("context AX", "上下文 AX"),
            r.nth(is_matmul, 1),
            false,
        ),
        step(
            lang.pick("Linear C → C", "Linear C → C"),
            r.nth(is_linear, 0),
            false,
        ),
        step(
            lang.pick("Linear C → 4C, GELU", "Linear C → 4C，GELU"),
            r.nth(is_gelu, 0),
            false,
        ),
        step(
            lang.pick("Linear 4C → C", "Linear 4C → C"),
            r.nth(is_linear, 2),
            false,
        ),
        step(
            lang.pick("output layer: Linear C → V", "输出层：Linear C → V"),
            r.nth(is_linear, 6),
            false,
        ),
        step(
            lang.pick("cross-entropy", "交叉熵"),
            r.nth(is_loss, 0),
            false,
        ),
    ]
}

/// The first and one-past-last box of the block in [`tutorial_steps`].
const BLOCK: (usize, usize) = (2, 7);

/// The boxes of one block of the full model, from its recorded forward pass; the first is its
/// input. `dropout` is the probability.
fn full_steps(lang: Lang, r: &Recorded, dropout: f64) -> Vec<Step> {
    let dropout = match lang {
        Lang::En => format!("dropout, p = {dropout}"),
        Lang::ZhCn => format!("Dropout，p = {dropout}"),
    };
    vec![
        step(
            lang.pick("block input x", "模块输入 x"),
            r.nth(is_add, 0),
            false,
        ),
        step(
            lang.pick("LayerNorm", "层归一化"),
            r.nth(is_layer_norm, 0),
            true,
        ),
        step(
            lang.pick("Q, K, V: Linear C → C each", "Q、K、V：各一个 Linear C → C"),
            r.nth(is_linear, 0),
            true,
        ),
        step(
            lang.pick("split into H heads", "拆成 H 个头"),
            r.nth(is_split, 0),
            true,
        ),
        step(
            lang.pick(
                "weights softmax(mask(QKᵀ/√D))",
                "权重 softmax(mask(QKᵀ/√D))",
            ),
            r.nth(is_softmax, 0),
            false,
        ),
        step(&dropout, r.nth(is_dropout, 0), true),
        step(
            lang.pick("context A V", "上下文 A V"),
            r.nth(is_matmul, 1),
            false,
        ),
        step(
            lang.pick("merge the heads", "合并各头"),
            r.nth(is_merge, 0),
            true,
        ),
        step(
            lang.pick("Linear C → C", "Linear C → C"),
            r.nth(is_linear, 3),
            false,
        ),
        step(
            lang.pick("+ x (residual)", "+ x（残差连接）"),
            r.nth(is_add, 1),
            true,
        ),
        step(
            lang.pick("LayerNorm", "层归一化"),
            r.nth(is_layer_norm, 1),
            true,
        ),
        step(
            lang.pick("feed-forward C → 4C → C", "前馈网络 C → 4C → C"),
            r.nth(is_linear, 5),
            false,
        ),
        step(
            lang.pick("+ (residual)", "+（残差连接）"),
            r.nth(is_add, 2),
            true,
        ),
    ]
}

/// Space between the tops of two boxes in a column, and a box's height.
const PITCH: f64 = 50.0;
const BOX_H: f64 = 24.0;
/// Where the columns' first boxes start.
const COLUMN_TOP: f64 = 96.0;

/// Draws `steps` as a column of boxes centred on `cx`, each followed by an arrow labelled with its
/// shape. Returns the y of each box's top.
fn column(svg: &mut String, steps: &[Step], cx: f64, width: f64) -> Vec<f64> {
    let mut tops = vec![];
    for (k, s) in steps.iter().enumerate() {
        let y = COLUMN_TOP + k as f64 * PITCH;
        let colours = if s.added {
            (ORANGE, ORANGE_FILL)
        } else {
            (BLUE, BLUE_FILL)
        };
        text_box(svg, cx, y, (width, BOX_H), colours, &s.text);
        let (from, to) = (y + BOX_H, y + PITCH);
        arrow(svg, (cx, from), (cx, to), GREY, 1.5, HEAD);
        text(
            svg,
            (cx + 8.0, from + 15.0),
            "start",
            12,
            DIM,
            &shape_text(&s.shape),
        );
        tops.push(y);
    }
    tops
}

/// A dashed frame around the boxes from `top` to `bottom`, its name written upwards along its
/// left side.
fn frame(svg: &mut String, x: f64, w: f64, (top, bottom): (f64, f64), name: &str) {
    sized("rect", (x, top), (w, bottom - top))
        .set("fill", "none")
        .set("stroke", "#999999")
        .set("stroke-dasharray", "5,4")
        .close(svg);
    vertical_text(svg, (x + 16.0, (top + bottom) / 2.0), 12, "#666666", name);
}

/// The residual path: from the arrow below box top `from` along the left, into box top `to`.
fn residual(svg: &mut String, cx: f64, box_w: f64, lane: f64, (from, to): (f64, f64)) {
    let start_y = from + BOX_H + 11.0;
    let x = cx - box_w / 2.0 - lane;
    let end_y = to + BOX_H / 2.0;
    let path = [
        (cx, start_y),
        (x, start_y),
        (x, end_y),
        (cx - box_w / 2.0 - 6.0, end_y),
    ];
    polyline(svg, &path, ORANGE, 1.5);
    dot(svg, (cx, start_y), 2.5, ORANGE);
    arrowhead(svg, (cx - box_w / 2.0, end_y), (1.0, 0.0), ORANGE, HEAD);
}

/// The parameters on a tape: the sum of their sizes, with thousands separated.
fn parameter_count(tape: &Tape) -> String {
    thousands(tape.params().iter().map(|p| p.data.len()).sum())
}

/// The model picture's columns: the centre and box width of the tutorial's, then of the full
/// block's.
const LEFT_COLUMN: (f64, f64) = (205.0, 230.0);
const RIGHT_COLUMN: (f64, f64) = (560.0, 250.0);

/// A column's heading at `cx`: its name, and under it, dimmer, the sizes or flags it is drawn at.
fn heading(svg: &mut String, cx: f64, name: &str, detail: &str) {
    text(svg, (cx, 46.0), "middle", 14, "black", name);
    text(svg, (cx, 64.0), "middle", 12, DIM, detail);
}

/// What a column ends in, 16 px under the last arrow's tip `end`, and its parameter count under it.
fn column_end(svg: &mut String, cx: f64, end: f64, (what, count): (&str, &str)) {
    text(svg, (cx, end + 16.0), "middle", 12, "black", what);
    text(svg, (cx, end + 40.0), "middle", 12, DIM, count);
}

/// One column of the model picture, read off a recorded forward pass: its boxes, the sizes or
/// flags it is drawn at, its parameter count and its number of blocks.
struct Column {
    steps: Vec<Step>,
    detail: String,
    params: String,
    blocks: usize,
}

/// The tutorial's model at the chapter's sizes, whole.
fn tutorial_column(lang: Lang) -> Column {
    let mut tape = Tape::new();
    let (b, config) = tutorial_pass(&mut tape);
    let ids = vec![b, config.context_size];
    Column {
        steps: tutorial_steps(lang, &Recorded { tape: &tape }, ids),
        detail: format!(
            "B = {b}, T = {}, C = {}, V = {}",
            config.context_size, config.embedding_size, config.vocab_size
        ),
        params: parameter_count(&tape),
        blocks: config.blocks,
    }
}

/// One block of the next chapter's full model.
fn full_column(lang: Lang) -> Column {
    let mut tape = Tape::new();
    let (flags, config) = full_pass(&mut tape);
    let arch = config.architecture;
    let d = arch
        .head_dim(config.embedding_size)
        .expect("the heads divide C");
    Column {
        steps: full_steps(lang, &Recorded { tape: &tape }, arch.dropout),
        detail: format!("{flags} (H = {}, D = {d})", arch.heads),
        params: parameter_count(&tape),
        blocks: config.blocks,
    }
}

/// `s5_model.svg`: the tutorial's model, whole, beside one block of the next chapter's full model,
/// each arrow labelled with the shape its forward pass records, what the tutorial leaves out in
/// orange.
fn model_figure(lang: Lang) -> Figure {
    let (left, right) = (tutorial_column(lang), full_column(lang));
    let height = COLUMN_TOP + right.steps.len() as f64 * PITCH + 100.0;
    let title = lang.pick(
        "Stage 5: the tutorial's model, and the full block it leaves out",
        "第 5 阶段：教程的模型，以及它省掉的完整模块",
    );
    let mut svg = open_svg(lang, 760.0, height, title);
    let name = lang.pick(
        "The tutorial's model (TutorialGpt)",
        "教程的模型（TutorialGpt）",
    );
    heading(&mut svg, LEFT_COLUMN.0, name, &left.detail);
    let name = lang.pick("One block of the full model", "完整模型的一个模块");
    heading(&mut svg, RIGHT_COLUMN.0, name, &right.detail);
    draw_tutorial(lang, &mut svg, &left);
    draw_full(lang, &mut svg, &right);
    model_legend(lang, &mut svg, height - 20.0);
    finish(lang, "s5_model.svg", svg)
}

/// The tutorial's column of boxes, its block framed, and what it ends in.
fn draw_tutorial(lang: Lang, svg: &mut String, left: &Column) {
    let (lx, lw) = LEFT_COLUMN;
    let tops = column(svg, &left.steps, lx, lw);
    let block_name = match lang {
        Lang::En => format!("block, × {}", left.blocks),
        Lang::ZhCn => format!("模块，× {}", left.blocks),
    };
    let (first, last) = (tops[BLOCK.0] - 5.0, tops[BLOCK.1] - PITCH + BOX_H + 5.0);
    frame(svg, 50.0, 330.0, (first, last), &block_name);
    let count = match lang {
        Lang::En => format!("{} parameters", left.params),
        Lang::ZhCn => format!("{} 个参数", left.params),
    };
    let loss = lang.pick("loss", "损失");
    column_end(svg, lx, tops[tops.len() - 1] + PITCH, (loss, &count));
}

/// The full block's column of boxes, its two residual paths, and what follows the last block.
fn draw_full(lang: Lang, svg: &mut String, right: &Column) {
    let (rx, rw) = RIGHT_COLUMN;
    let tops = column(svg, &right.steps, rx, rw);
    // Each residual path leaves the arrow below a sublayer's input and joins its "+" box.
    residual(svg, rx, rw, 22.0, (tops[0], tops[9]));
    residual(svg, rx, rw, 12.0, (tops[9], tops[12]));
    let rest = lang.pick(
        "after the last block: LayerNorm, then Linear C → V",
        "最后一个模块之后：层归一化，再接 Linear C → V",
    );
    let (params, blocks) = (&right.params, right.blocks);
    let count = match lang {
        Lang::En => format!("{params} parameters with {blocks} blocks"),
        Lang::ZhCn => format!("{blocks} 个模块，共 {params} 个参数"),
    };
    column_end(svg, rx, tops[tops.len() - 1] + PITCH, (rest, &count));
}

/// The model picture's legend on the baseline `ly`: the fills of what the tutorial's model has and
/// of what it leaves out, and what the arrows' labels are.
fn model_legend(lang: Lang, svg: &mut String, ly: f64) {
    let key = |svg: &mut String, x: f64, (stroke, fill): (&str, &str), words: &str| {
        Tag::new("rect")
            .at((x, ly - 10.0))
            .set("width", 18)
            .set("height", 12)
            .set("rx", 2)
            .set("fill", fill)
            .set("stroke", stroke)
            .close(svg);
        legend_label(svg, (x + 18.0, ly), words);
    };
    let has = lang.pick("in the tutorial's model", "教程的模型里有");
    key(svg, 60.0, (BLUE, BLUE_FILL), has);
    let leaves_out = lang.pick("what it leaves out", "教程的模型省掉的");
    key(svg, 300.0, (ORANGE, ORANGE_FILL), leaves_out);
    let arrows = lang.pick("arrows: tensor shapes", "箭头上：张量形状");
    text(svg, (540.0, ly), "start", 12, DIM, arrows);
}

// ---------------------------------------------------------------------------------------------
// The tape.

/// The expression the tape picture records, L = cross_entropy(gelu(x·Wᵀ + b) + x, target), and its
/// nodes in tape order: x, W and b (parameters, the leaves), then one node per operation.
pub(crate) struct TapeExample {
    pub tape: Tape,
    pub nodes: [NodeId; 7],
    pub target: usize,
}

/// Records the expression on a new tape and runs `backward` from L. `w` is (2, 2), `b` (2), `x`
/// (1, 2).
pub(crate) fn tape_example(w: [f32; 4], b: [f32; 2], x: [f32; 2], target: usize) -> TapeExample {
    let mut tape = Tape::new();
    let x = tape.param(Tensor::new(&[1, 2], x.to_vec()));
    let w = tape.param(Tensor::new(&[2, 2], w.to_vec()));
    let b = tape.param(Tensor::new(&[2], b.to_vec()));
    let h = tape.linear(x, w, b); // (1, 2)
    let g = tape.gelu(h); // (1, 2)
    let y = tape.add(g, x); // (1, 2): x is used twice
    let loss = tape.cross_entropy(y, &[target]); // ()
    tape.backward(loss);
    TapeExample {
        tape,
        nodes: [x, w, b, h, g, y, loss],
        target,
    }
}

/// The example the book draws.
fn book_tape_example() -> TapeExample {
    tape_example([0.5, -1.0, 1.5, 0.25], [0.1, -0.2], [1.0, -0.5], 1)
}

/// A tensor's rows, each as `[a, b]` with four decimals; a scalar as its one number.
fn rows_text(shape: &[usize], data: &[f32]) -> Vec<String> {
    let fmt = |v: &[f32]| {
        let parts: Vec<String> = v.iter().map(|x| format!("{x:.4}")).collect();
        parts.join(", ")
    };
    if shape.is_empty() {
        return vec![fmt(data)];
    }
    let cols = shape[shape.len() - 1];
    data.chunks(cols)
        .map(|row| format!("[{}]", fmt(row)))
        .collect()
}

/// Geometry of the tape picture: the table's left edge, its columns' left edges and widths, and
/// the rows.
const TABLE_LEFT: f64 = 150.0;
const COLS: [(f64, f64); 4] = [
    (150.0, 30.0),
    (180.0, 190.0),
    (370.0, 150.0),
    (520.0, 150.0),
];
const ROW_TOP: f64 = 78.0;
const ROW_PITCH: f64 = 56.0;
const ROW_H: f64 = 44.0;

/// Where an edge leaves its input's row, below the row's middle; edges enter a row above it.
const LEAVE: f64 = 12.0;

/// The lane of each edge `(from row, to row)`, shortest edges first: the innermost lane where it
/// overlaps no other edge's vertical stretch; and its place among the edges entering the same row,
/// the innermost lane entering highest, so that no edge crosses another where it enters.
fn edge_lanes(edges: &[(usize, usize)]) -> Vec<(usize, usize)> {
    let mut lanes: Vec<Vec<(usize, usize)>> = vec![];
    let overlap = |a: &(usize, usize), b: &(usize, usize)| a.0 < b.1 && b.0 < a.1;
    let lane_of: Vec<usize> = edges
        .iter()
        .map(|e| {
            let free = lanes
                .iter()
                .position(|lane| !lane.iter().any(|o| overlap(o, e)));
            let lane = free.unwrap_or(lanes.len());
            if lane == lanes.len() {
                lanes.push(vec![]);
            }
            lanes[lane].push(*e);
            lane
        })
        .collect();
    let entry = |k: usize| {
        let into = |j: usize| edges[j].1 == edges[k].1;
        (0..edges.len())
            .filter(|&j| into(j) && lane_of[j] < lane_of[k])
            .count()
    };
    (0..edges.len()).map(|k| (lane_of[k], entry(k))).collect()
}

/// The top of row `k` of the tape picture.
fn row_y(k: usize) -> f64 {
    ROW_TOP + k as f64 * ROW_PITCH
}

/// `s5_tape.svg`: the tape of [`book_tape_example`], one row per node in tape order (its op, its
/// value, its gradient after `backward`), with an arrow from each input to the node that uses it.
fn tape_figure(lang: Lang) -> Figure {
    let ex = book_tape_example();
    let n = ex.nodes.len();
    let (width, height) = (760.0, ROW_TOP + n as f64 * ROW_PITCH + 40.0);
    let title = lang.pick(
        "Stage 5: the tape of a small expression, after backward",
        "第 5 阶段：一个小表达式的记录带，反向传播之后",
    );
    let mut svg = open_svg(lang, width, height, title);
    let heads = [
        "#",
        lang.pick("node: what made it, shape", "节点：由什么算出，形状"),
        lang.pick("value", "值"),
        lang.pick("gradient ∂L/∂·", "梯度 ∂L/∂·"),
    ];
    for ((x, w), head) in COLS.iter().zip(heads) {
        text(
            &mut svg,
            (x + w / 2.0, ROW_TOP - 10.0),
            "middle",
            12,
            DIM,
            head,
        );
    }
    for (k, (&id, name)) in ex.nodes.iter().zip(node_names(lang, &ex)).enumerate() {
        tape_row(&mut svg, &ex.tape, id, row_y(k), &name);
    }
    tape_edges(&mut svg, &ex);
    directions(lang, &mut svg, (row_y(0) + 4.0, row_y(n - 1) + ROW_H - 4.0));
    let note = lang.pick(
        "x feeds two nodes, so its gradient is the sum of the two that come back",
        "x 用在两个节点里，所以它的梯度是两路传回的梯度之和",
    );
    text(
        &mut svg,
        (width / 2.0, height - 14.0),
        "middle",
        12,
        DIM,
        note,
    );
    finish(lang, "s5_tape.svg", svg)
}

/// What made each node of the tape picture, in tape order.
fn node_names(lang: Lang, ex: &TapeExample) -> [String; 7] {
    [
        lang.pick("x, parameter", "x，参数").to_string(),
        lang.pick("W, parameter", "W，参数").to_string(),
        lang.pick("b, parameter", "b，参数").to_string(),
        "h = linear(x, W, b)".to_string(),
        "g = gelu(h)".to_string(),
        "y = g + x".to_string(),
        format!("L = cross_entropy(y, {})", ex.target),
    ]
}

/// Node `id`'s row, its top at `y`: its number, what made it and its shape, its value, and its
/// gradient in red; a parameter's row is filled blue.
fn tape_row(svg: &mut String, tape: &Tape, id: NodeId, y: f64, name: &str) {
    let value = tape.value(id);
    let grad = tape.grad(id).map(<[f32]>::to_vec);
    let grad = grad.unwrap_or_else(|| vec![0.0; value.data.len()]);
    let fill = if matches!(tape.op(id), Op::Leaf) {
        BLUE_FILL
    } else {
        "#f2f2f2"
    };
    for &(x, w) in &COLS {
        rect(svg, (x, y), (w, ROW_H), fill, GREY);
    }
    let mid = y + ROW_H / 2.0;
    let number = id.0.to_string();
    text(
        svg,
        (COLS[0].0 + 15.0, mid + 4.5),
        "middle",
        12,
        "black",
        &number,
    );
    text(
        svg,
        (COLS[1].0 + 8.0, mid - 3.0),
        "start",
        13,
        "black",
        name,
    );
    let shape = shape_text(&value.shape);
    text(
        svg,
        (COLS[1].0 + 8.0, mid + 14.0),
        "start",
        12,
        "#666666",
        &shape,
    );
    let cells = [
        (COLS[2], rows_text(&value.shape, &value.data), "black"),
        (COLS[3], rows_text(&value.shape, &grad), RED),
    ];
    for ((x, w), lines, colour) in cells {
        let first = mid + 4.5 - 8.0 * (lines.len() as f64 - 1.0);
        for (j, line) in lines.iter().enumerate() {
            let at = (x + w / 2.0, first + 16.0 * j as f64);
            text(svg, at, "middle", 12, colour, line);
        }
    }
}

/// An arrow from each input's row to the row of the node that uses it, along the table's left in
/// the lanes of [`edge_lanes`].
fn tape_edges(svg: &mut String, ex: &TapeExample) {
    let row_of = |id: NodeId| {
        ex.nodes
            .iter()
            .position(|&n| n == id)
            .expect("a drawn node")
    };
    let mut edges: Vec<(usize, usize)> = ex
        .nodes
        .iter()
        .enumerate()
        .flat_map(|(k, &id)| ex.tape.op(id).inputs().into_iter().map(move |x| (x, k)))
        .map(|(x, k)| (row_of(x), k))
        .collect();
    edges.sort_by_key(|&(from, to)| (to - from, to));
    for ((from, to), (lane, entry)) in edges.iter().zip(edge_lanes(&edges)) {
        let x = TABLE_LEFT - 16.0 - 14.0 * lane as f64;
        let y0 = row_y(*from) + ROW_H / 2.0 + LEAVE;
        let y1 = row_y(*to) + ROW_H / 2.0 - 14.0 + 8.0 * entry as f64;
        let path = [(TABLE_LEFT, y0), (x, y0), (x, y1), (TABLE_LEFT - 6.0, y1)];
        polyline(svg, &path, BLUE, 1.3);
        arrowhead(svg, (TABLE_LEFT, y1), (1.0, 0.0), BLUE, HEAD);
    }
}

/// Forward runs down the tape, backward up it: an arrow and its words on each side, from `top` to
/// `bottom`.
fn directions(lang: Lang, svg: &mut String, (top, bottom): (f64, f64)) {
    arrow(svg, (18.0, top), (18.0, bottom), BLUE, 1.5, HEAD);
    arrow(svg, (706.0, bottom), (706.0, top), RED, 1.5, HEAD);
    let middle = (top + bottom) / 2.0;
    let forward = lang.pick("forward: records each node", "前向：逐个记录节点");
    vertical_text(svg, (32.0, middle), 12, BLUE, forward);
    let backward = lang.pick(
        "backward: gradients, last node first",
        "反向：从最后一个节点算梯度",
    );
    vertical_text(svg, (690.0, middle), 12, RED, backward);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_model_picture_labels_its_arrows_with_the_recorded_shapes() {
        let figure = model_figure(Lang::En);
        let (b, config) = chapter_config(Architecture::default());
        assert_eq!(config.vocab_size, 65);
        if let Ok(text) = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(crate::s5_gpt::data::DATA_FILE),
        ) {
            let corpus = CharDataset::from_text(&text, b, config.context_size);
            assert_eq!(
                corpus.vocab,
                TINY_SHAKESPEARE_VOCAB.chars().collect::<Vec<_>>()
            );
        }
        let (t, c, v) = (
            config.context_size,
            config.embedding_size,
            config.vocab_size,
        );
        for shape in [
            shape_text(&[b, t]),
            shape_text(&[b, t, c]),
            shape_text(&[b, t, t]),
            shape_text(&[b, t, 4 * c]),
            shape_text(&[b, t, v]),
            shape_text(&[]),
            shape_text(&[b, 4, t, c / 4]),
            shape_text(&[b, 4, t, t]),
        ] {
            let drawn = format!(">{shape}</text>");
            assert!(figure.svg.contains(&drawn), "no arrow says {shape}");
        }
        // The tutorial's blocks are blue, what the full block adds orange: LayerNorm twice, Q/K/V,
        // split, dropout, merge and two residual additions.
        let boxes = |fill: &str| {
            figure
                .svg
                .matches(&format!("fill=\"{fill}\" stroke"))
                .count()
        };
        assert_eq!(boxes(ORANGE_FILL), 8 + 1); // and the legend's key
        assert_eq!(boxes(BLUE_FILL), 9 + 5 + 1);
        assert!(figure.svg.contains(">84,929 parameters</text>"));
    }

    #[test]
    fn the_tape_picture_shows_the_tapes_values_and_gradients() {
        let figure = tape_figure(Lang::En);
        let ex = book_tape_example();
        for &id in &ex.nodes {
            let value = ex.tape.value(id);
            let grad = ex.tape.grad(id).expect("every node reaches the loss");
            for line in rows_text(&value.shape, grad) {
                assert!(figure.svg.contains(&format!(">{line}</text>")), "{line}");
            }
            for line in rows_text(&value.shape, &value.data) {
                assert!(figure.svg.contains(&format!(">{line}</text>")), "{line}");
            }
        }
        // Seven edges: linear has three inputs, gelu one, add two, the loss one.
        assert_eq!(figure.svg.matches("<polyline").count(), 7);
    }

    #[test]
    fn the_tapes_gradients_are_finite_differences() {
        let (w, b, x) = ([0.5, -1.0, 1.5, 0.25], [0.1, -0.2], [1.0, -0.5]);
        let ex = tape_example(w, b, x, 1);
        let loss = |w: [f32; 4], x: [f32; 2]| {
            let e = tape_example(w, b, x, 1);
            f64::from(e.tape.value(e.nodes[6]).data[0])
        };
        let eps = 1e-2f32;
        for k in 0..4 {
            let (mut up, mut down) = (w, w);
            up[k] += eps;
            down[k] -= eps;
            let numeric = (loss(up, x) - loss(down, x)) / (2.0 * f64::from(eps));
            let analytic = f64::from(ex.tape.grad(ex.nodes[1]).unwrap()[k]);
            assert!(
                (numeric - analytic).abs() < 1e-3,
                "dL/dW[{k}]: {numeric} vs {analytic}"
            );
        }
        // x's gradient is the sum of its two paths, through linear and through the addition.
        for k in 0..2 {
            let (mut up, mut down) = (x, x);
            up[k] += eps;
            down[k] -= eps;
            let numeric = (loss(w, up) - loss(w, down)) / (2.0 * f64::from(eps));
            let analytic = f64::from(ex.tape.grad(ex.nodes[0]).unwrap()[k]);
            assert!(
                (numeric - analytic).abs() < 1e-3,
                "dL/dx[{k}]: {numeric} vs {analytic}"
            );
        }
    }
}
