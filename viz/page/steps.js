// The steps of one head, in the chapters' order: each step's card, its table or heatmap.
"use strict";

function shapeText(step) {
  const [rows, cols] = step.shape;
  const names = { x: "T × C", xx_out: "T × C", concat: "T × C", projected: "T × C", residual: "T × C",
    q: "T × d_k", k: "T × d_k", v: "T × d_k", out: "T × d_k" };
  return `${rows} × ${cols} (${names[step.key] || "T × T"})`;
}

// Where the step is computed: model/gpt.py's own source (viz/attention_steps.py
// MODEL_CODE, held to the source by a test), or viz/ for X·Xᵀ.
function codeText(code) {
  return code.startsWith("viz/") ? code : `model/gpt.py · ${code}`;
}

// Under X at layer 0: X is the chapters' X, the characters' embeddings after the norm.
function layerZeroNote() {
  const key = MODEL.position === "rope" ? "step.x.layer0_rope" : "step.x.layer0_learned";
  return richEl("p", key, { norm: MODEL.norm === "rmsnorm" ? "RMSNorm" : "LayerNorm" },
    { class: "note", id: "layer0-note" });
}

function renderSteps() {
  const box = $("steps");
  const head = stepHead();
  const title = t("steps.title", { layer: state.layer, head }) + whatIfTag();
  $("steps-title").textContent = title + (state.head === null ? t("steps.per_head") : "");
  const steps = stepsShown();
  box.dataset.ready = "";
  if (!steps) {
    box.replaceChildren(el("p", t(DATA.served ? "steps.computing" : "steps.none"), { class: "muted" }));
    renderDerivation();
    return;
  }
  const own = steps.heads[String(head)];
  const nodes = [];
  let chapter = 0;
  for (const key of steps.order) {
    const step = steps.layer_steps[key] || own[key];
    if (step.chapter !== chapter) {
      chapter = step.chapter;
      // A step a switch replaced is headed by what the switch did, not the chapters' name.
      const switched = headSwitches().find((key) => SWITCHED_CHAPTER[key] === chapter);
      nodes.push(switched
        ? el("h3", t("step.heading_whatif", { chapter, what: t(`switch.${switched}`) }), { class: "whatif-tag" })
        : richEl("h3", "step.heading", { chapter, name: steps.chapters[String(chapter)] }));
    }
    const card = el("div", null, { class: "step", "data-step": key });
    const switchedStep = step.title.key.split(".").length > 3; // step.<key>.<switch>.title
    card.append(
      richEl("h4", step.title.key, step.title.args, switchedStep ? { class: "whatif-tag" } : {}),
      el("div", tm(step.formula), { class: "formula" }),
      el("div", codeText(step.code), { class: "code" }),
      el("div", shapeText(step), { class: "shape" }),
    );
    if (key === "x" && steps.layer === 0) card.append(layerZeroNote());
    card.append(renderMatrix(step));
    nodes.push(card);
  }
  box.replaceChildren(...nodes);
  box.dataset.ready = `${steps.layer},${head},${headSwitches().join("+")}`;
  renderDerivation();
}

// The steps of the picked layer and head, if they are here (else null: being asked for).
function stepsShown() {
  const steps = state.steps;
  if (!steps || steps.layer !== state.layer || !steps.heads[String(stepHead())]) return null;
  return steps;
}

// The chapter step each what-if switch replaces (viz/attention_steps.py SWITCHED_STEP).
const SWITCHED_CHAPTER = { xx_scores: 4, no_scale: 5, no_mask: 6, uniform: 7 };

// What hovering or clicking a cell of a step explains: a score or weight cell, or a
// row of weights·V.
const EXPLAINED = { scores: "cell", scaled: "cell", masked: "cell", weights: "cell",
  xx: "xx", xx_weights: "xx", out: "row" };

function cellEvents(node, step, i, j) {
  const kind = EXPLAINED[step.key];
  if (!kind) return;
  node.addEventListener("mouseenter", () => hoverCell(step.key, i, j));
  node.addEventListener("click", () => lockCell(step.key, i, j));
}

function renderMatrix(step, maxWidth) {
  const [, cols] = step.shape;
  return cols <= NUMBER_COLUMNS && !maxWidth ? numberTable(step) : heatmap(step, maxWidth);
}

function rowLabels() {
  return state.result.labels;
}

function numberTable(step) {
  const labels = rowLabels();
  const [, cols] = step.shape;
  const characters = step.columns === "characters";
  const scale = matrixScale(step.values);
  const table = el("table", null, { class: "weights", "data-step": step.key });
  const index = el("tr");
  index.append(el("th"), el("th"));
  for (let j = 0; j < cols; j++) index.append(el("th", j, { class: "idx" }));
  const head = el("thead");
  head.append(index);
  if (characters) {
    const chars = el("tr");
    chars.append(el("th"), el("th"));
    for (let j = 0; j < cols; j++) chars.append(el("th", labels[j], { class: "char" }));
    head.append(chars);
  }
  const body = el("tbody");
  step.values.forEach((row, i) => {
    const tr = el("tr", null, { "data-row": i });
    tr.append(el("th", i, { class: "idx" }), el("th", labels[i], { class: "char" }));
    row.forEach((x, j) => {
      const future = characters && j > i;
      const td = el("td", fmt(x, DECIMALS), {
        "data-i": i, "data-j": j, title: exactText(x) + (future ? t("table.future_title") : ""),
      });
      // Grey: the masked future, −∞ before the softmax and 0 after it. Without the mask
      // (a what-if) the future has real weights, drawn like any other.
      if (future && (x === null || (step.kind === "weights" && x === 0))) td.classList.add("future");
      else {
        const [r, g, b, a] = valueColor(x, step.kind, scale);
        td.style.background = `rgba(${r}, ${g}, ${b}, ${a.toFixed(3)})`;
        if (a > 0.55) td.style.color = "#fff";
      }
      if (isKept(step.key, i, j)) td.classList.add("locked");
      cellEvents(td, step, i, j);
      tr.append(td);
    });
    body.append(tr);
  });
  table.append(head, body);
  const wrap = el("div", null, { class: "scroll" });
  wrap.append(table);
  return wrap;
}

// A wide step (X has n_embd columns) as a canvas of coloured cells; hovering shows the
// cell's exact value, a click keeps a derivation as in a table.
const TICK_PX = 28; // the least room between two column labels of a heatmap

function heatmap(step, maxWidth) {
  const labels = rowLabels();
  const [rows, cols] = step.shape;
  const characters = step.columns === "characters";
  const cellW = Math.max(2, Math.min(18, Math.floor((maxWidth || 560) / cols)));
  const cellH = Math.max(4, Math.min(18, Math.floor(420 / rows)));
  const left = 44;
  const top = 14; // room for the column labels
  const width = left + cols * cellW + 20; // room for the last column's label ("126")
  const height = top + rows * cellH + 2;
  const canvas = el("canvas", null, { "data-step": step.key, role: "img",
    "aria-label": t("heatmap.label", { key: step.key, rows, cols }),
    "data-left": left, "data-top": top, "data-cell-w": cellW, "data-cell-h": cellH });
  const ratio = window.devicePixelRatio || 1;
  canvas.width = Math.round(width * ratio);
  canvas.height = Math.round(height * ratio);
  canvas.style.width = `${width}px`;
  canvas.style.height = `${height}px`;
  const g = canvas.getContext("2d");
  g.scale(ratio, ratio);
  const scale = matrixScale(step.values);
  g.font = `${Math.min(12, cellH)}px ${getComputedStyle(document.body).fontFamily}`;
  g.textBaseline = "middle";
  g.fillStyle = "#656d76";
  if (rows * cellH >= rows * 9) {
    for (let i = 0; i < rows; i++) g.fillText(`${i} ${labels[i]}`, 2, top + i * cellH + cellH / 2);
  }
  // Column labels along the top, at least TICK_PX apart: the characters where a cell is
  // wide enough for one, else the column numbers.
  g.font = `10px ${getComputedStyle(document.body).fontFamily}`;
  const every = Math.max(1, Math.ceil(TICK_PX / cellW));
  for (let j = 0; j < cols; j += every) {
    const name = characters && cellW >= 10 ? labels[j] : String(j);
    g.fillText(name, left + j * cellW, top / 2);
  }
  // One pixel per cell, blended on white, then scaled up without smoothing: far
  // faster than a fillRect per cell for T × C tables.
  const pixels = new ImageData(cols, rows);
  step.values.forEach((row, i) => {
    row.forEach((x, j) => {
      const [r, gg, b, a] = valueColor(x, step.kind, scale);
      const at = 4 * (i * cols + j);
      pixels.data[at] = Math.round(255 + (r - 255) * a);
      pixels.data[at + 1] = Math.round(255 + (gg - 255) * a);
      pixels.data[at + 2] = Math.round(255 + (b - 255) * a);
      pixels.data[at + 3] = 255;
    });
  });
  const cells = document.createElement("canvas");
  cells.width = cols;
  cells.height = rows;
  cells.getContext("2d").putImageData(pixels, 0, 0);
  g.imageSmoothingEnabled = false;
  g.drawImage(cells, left, top, cols * cellW, rows * cellH);
  const kept = state.derivation && state.derivation.locked ? state.derivation : null;
  if (kept && kept.i < rows && isKept(step.key, kept.i, kept.j)) { // the kept cell or row
    g.lineWidth = 2;
    g.strokeStyle = "#111827";
    const row = EXPLAINED[step.key] === "row";
    g.strokeRect(left + (row ? 0 : kept.j * cellW), top + kept.i * cellH,
      row ? cols * cellW : cellW, cellH);
  }
  if (step.key === "concat") { // each head's d_k columns; this head's framed
    const d = MODEL.d_k;
    g.strokeStyle = "#111827";
    for (let h = 1; h < MODEL.n_head; h++) {
      g.fillStyle = "#111827";
      g.fillRect(left + h * d * cellW - 0.5, top, 1, rows * cellH);
    }
    g.lineWidth = 2;
    g.strokeStyle = "#f59e0b";
    g.strokeRect(left + stepHead() * d * cellW, top - 2, d * cellW, rows * cellH + 3);
  }
  const cellAt = (event) => {
    const box = canvas.getBoundingClientRect();
    const j = Math.floor((event.clientX - box.left - left) / cellW);
    const i = Math.floor((event.clientY - box.top - top) / cellH);
    return i >= 0 && i < rows && j >= 0 && j < cols ? [i, j] : null;
  };
  const tip = $("tip");
  canvas.addEventListener("mousemove", (event) => {
    const at = cellAt(event);
    if (!at) { tip.hidden = true; return; }
    const [i, j] = at;
    const column = characters ? t("heatmap.column_char", { char: labels[j], j }) : t("heatmap.channel", { j });
    tip.textContent = t("heatmap.tip", { char: labels[i], i, column, value: exactText(step.values[i][j]) });
    tip.style.left = `${event.clientX + 12}px`;
    tip.style.top = `${event.clientY + 12}px`;
    tip.hidden = false;
    if (EXPLAINED[step.key]) hoverCell(step.key, i, j);
  });
  canvas.addEventListener("mouseleave", () => { tip.hidden = true; });
  canvas.addEventListener("click", (event) => {
    const at = cellAt(event);
    if (at && EXPLAINED[step.key]) lockCell(step.key, at[0], at[1]);
  });
  const wrap = el("div", null, { class: "heatmap scroll" });
  wrap.append(canvas, heatmapLegend(step, scale, cols));
  return wrap;
}

// Under a heatmap: its colour scale with the values at either end, and what its columns
// are (characters or channels, numbered along the top).
function heatmapLegend(step, scale, cols) {
  const weights = step.kind === "weights";
  const low = weights ? "0" : fmt(-scale, DECIMALS);
  const high = weights ? "1" : fmt(scale, DECIMALS);
  const bar = el("span", null, { class: "legend-bar" });
  bar.style.background = weights ? "linear-gradient(to right, #fff, rgb(29, 78, 216))"
    : "linear-gradient(to right, rgb(29, 78, 216), #fff, rgb(220, 38, 38))";
  const legend = el("div", null, { class: "heatmap-legend", "data-legend": step.key });
  legend.append(
    el("span", low, { class: "legend-low" }), bar, el("span", high, { class: "legend-high" }),
    el("span", t(weights ? "heatmap.colour_weights" : "heatmap.colour_signed", { scale: high })),
    el("span", t(step.columns === "characters" ? "heatmap.columns_chars" : "heatmap.columns_channels",
      { last: cols - 1 }), { class: "legend-columns" }),
  );
  return legend;
}
