// The page's data, state and shared helpers: numbers as Python prints them, the
// softmax at a temperature, colours, and `el` (text only ever through textContent).
"use strict";

const DATA = JSON.parse(document.getElementById("explorer-data").textContent);
const MODEL = DATA.model;
const TOP_K = 10;
const DECIMALS = 2; // as explore_attention.py prints by default
const DERIVATION_DECIMALS = 4;
const NUMBER_COLUMNS = 16; // a table wider than this is drawn as a heatmap
const LENS_SHOWN = 5;
const state = {
  result: DATA.result,
  layer: MODEL.n_layer - 1, // the CLI's default: the last layer ...
  head: null, // ... averaged over its heads
  row: null, // the picked character (its position)
  temperature: DATA.result ? DATA.result.temperature : 1,
  steps: null, // steps of (layer, stepHead()) for the shown prompt and switches
  switches: new Set(), // what-if switches on, for (layer, stepHead())
  derivation: null, // {kind, key, i, j, locked}
  request: 0, // the latest request: older answers are dropped
  messages: [], // what #message shows: catalogue messages ({key, args}) or the server's text
  messagesAreErrors: false,
};
const $ = (id) => document.getElementById(id);

// An element with text set through textContent: a prompt never becomes HTML.
function el(tag, text, attributes) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = String(text);
  for (const [key, value] of Object.entries(attributes || {})) node.setAttribute(key, value);
  return node;
}

// x with `decimals` digits after the point, rounded as Python's format() rounds: to the
// nearest, and an exact tie (0.125 is one) to the even digit. toFixed alone rounds
// ties up, so 0.125 would read 0.13 here and 0.12 in the terminal.
function formatFixed(x, decimals) {
  const rounded = x.toFixed(decimals);
  const exact = x.toFixed(Math.min(100, decimals + 60)); // every digit of a float32 value
  const cut = exact.indexOf(".") + 1 + decimals;
  if (!/^50*$/.test(exact.slice(cut))) return rounded;
  const truncated = exact.slice(0, decimals === 0 ? cut - 1 : cut);
  return Number(truncated.slice(-1)) % 2 === 0 ? truncated : rounded;
}

// A change (after − before), rounded: one that rounds to zero reads 0.000, not −0.000,
// whichever side of zero it was on.
function formatChange(x, decimals) {
  const text = formatFixed(x, decimals);
  return /^-0(\.0*)?$/.test(text) ? text.slice(1) : text;
}

// A step's value as shown: −∞ for the mask (sent as null), else rounded.
function fmt(x, decimals) {
  return x === null ? "−∞" : formatFixed(x, decimals);
}

function exactText(x) {
  return x === null ? "−∞" : String(x);
}

// softmax(logits / temperature) over the whole vocabulary; temperature 0 is greedy:
// the first largest logit gets probability 1. The same as next_char_probabilities in
// viz/attention_server.py.
function probabilities(logits, temperature) {
  let best = 0;
  for (let i = 1; i < logits.length; i++) if (logits[i] > logits[best]) best = i;
  if (temperature === 0) return logits.map((_, i) => (i === best ? 1 : 0));
  const exps = logits.map((z) => Math.exp((z - logits[best]) / temperature));
  const total = exps.reduce((a, b) => a + b, 0);
  return exps.map((e) => e / total);
}

// The ids of the k largest logits, largest first (ties by id): the same order at
// every temperature, 0 included, where every probability but the first is 0.
function topK(logits, k) {
  const order = logits.map((_, i) => i);
  order.sort((a, b) => logits[b] - logits[a] || a - b);
  return order.slice(0, k);
}

// Messages of the catalogue ({key, args}) in the page's language, or the server's text.
function showMessages(messages, isError) {
  state.messages = messages;
  state.messagesAreErrors = isError;
  const box = $("message");
  box.replaceChildren(...messages.map((m) => el("p", isMessage(m) ? tm(m) : m,
    isError ? { class: "error" } : {})));
}

function headWeights(layer, head) {
  return head === null ? state.result.average[layer] : state.result.weights[layer][head];
}

function headName(head) {
  return head === null ? t("head.average_of", { n_head: MODEL.n_head }) : t("head.name", { head });
}

// The head whose steps are shown: the picked one, or head 0 under "average".
function stepHead() {
  return state.head === null ? 0 : state.head;
}

function quoted(i) {
  return t("char.quoted", { char: state.result.labels[i], position: i });
}

function whatIf() {
  return state.result ? state.result.what_if : null;
}

function shade(cell, w) {
  cell.style.background = `rgba(29, 78, 216, ${Math.min(1, Math.max(0, w)).toFixed(3)})`;
  if (w > 0.55) cell.style.color = "#fff";
}

// Background of a step's value: weights in blue from 0 to 1; other numbers red when
// positive, blue when negative, as strong as |x| / scale; −∞ grey.
function valueColor(x, kind, scale) {
  if (x === null) return [229, 231, 235, 1];
  if (kind === "weights") return [29, 78, 216, Math.min(1, Math.max(0, x))];
  const strength = scale > 0 ? Math.min(1, Math.abs(x) / scale) : 0;
  return x >= 0 ? [220, 38, 38, strength] : [29, 78, 216, strength];
}

function matrixScale(values) {
  let scale = 0;
  for (const row of values) for (const x of row) if (x !== null) scale = Math.max(scale, Math.abs(x));
  return scale;
}


function whatIfTag() {
  return whatIf() ? t("whatif.tag") : "";
}

// A switch is on for head `head` of layer `layer` in the shown pass.
function switchedHere(layer, head, key) {
  const w = whatIf();
  return Boolean(w && w.layer === layer && w.head === head && w.switches.includes(key));
}
