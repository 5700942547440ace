// The model over training (viz/snapshot_explorers.py): a slider over the run's snapshots
// that asks every view again at the chosen one, and how the shown head's weights for the
// prompt moved between two snapshots.
"use strict";

const KEPT_ANSWERS = 8; // the changes view's answers kept, by step and prompt
const SLIDER_REST_MS = 150;
const DIFFERENCE_DECIMALS = 3;
const training = {
  snapshots: [], // GET api/snapshots: [{step, val_loss, sample, best}], by step
  position: 0, // the slider's: an index of snapshots; snapshots.length: the finished model
  from: null, // the step the changes view starts from; null: the snapshot before the shown
  answers: new Map(), // "step|prompt" -> the model's own /api/attention answer at that step
  asked: new Set(), // the keys asked for and not yet answered
  timer: null, // the slider's pending request (pickSnapshot)
};

// The step the page's views are asked at: a snapshot's, or undefined for the finished model.
function shownStep() {
  const snapshot = training.snapshots[training.position];
  return snapshot === undefined ? undefined : snapshot.step;
}

function stepName(step) {
  return step === undefined ? t("training.finished_short") : t("training.step_name", { step });
}

// Appended to the tables' titles while a snapshot is shown: which model they are of.
function snapshotTag() {
  const step = shownStep();
  return step === undefined ? "" : t("training.tag", { step });
}

async function loadSnapshots() {
  if (!DATA.served) return;
  try {
    const response = await fetch("api/snapshots");
    training.snapshots = (await response.json()).snapshots || [];
  } catch (error) {
    training.snapshots = [];
  }
  training.position = training.snapshots.length;
  const slider = $("training-step");
  slider.max = String(training.snapshots.length);
  slider.value = slider.max;
  renderTraining();
}

// The label follows the slider at once; the page asks again once it rests a moment, so
// a drag across the run loads the snapshots it stops on, not every one it passes.
function pickSnapshot(position) {
  training.position = position;
  renderTraining();
  clearTimeout(training.timer);
  training.timer = setTimeout(() => {
    if (state.result) show(state.result.prompt, { keepPrompt: true });
  }, SLIDER_REST_MS);
}

function renderTraining() {
  const section = $("training-section");
  section.hidden = training.snapshots.length === 0;
  if (section.hidden) return;
  const snapshot = training.snapshots[training.position];
  const value = snapshot === undefined ? t("training.finished")
    : t("training.at", { step: snapshot.step, val_loss: snapshot.val_loss.toFixed(3) }) +
      (snapshot.best ? t("training.best") : "");
  $("training-value").textContent = value;
  const sample = $("training-sample");
  sample.hidden = snapshot === undefined;
  if (snapshot !== undefined) {
    sample.replaceChildren(el("div", t(snapshot.sample ? "training.sample" : "training.no_sample"),
      { class: "muted" }), el("div", snapshot.sample, { class: "sample-text" }));
  }
  renderSnapshotChanges();
}

// The snapshot the changes view starts from: the chosen one, else the one before the
// shown; null before the first. The finished model of a run whose last snapshot is of its
// own step holds that snapshot's weights (but for float16 rounding): the one before it.
function changesFrom() {
  if (training.from !== null) return training.from;
  let index = training.position - 1;
  if (training.position === training.snapshots.length && finishedIsLastSnapshot()) index -= 1;
  const before = training.snapshots[index];
  return before === undefined ? null : before.step;
}

function finishedIsLastSnapshot() {
  const last = training.snapshots[training.snapshots.length - 1];
  return last !== undefined && MODEL.step !== null && MODEL.step !== undefined && last.step === MODEL.step;
}

function answerKey(step, prompt) {
  return `${step === undefined ? "finished" : step}|${prompt}`;
}

// The model's own answer (no switches) at `step` for `prompt`, kept for the next draw.
async function askOwnAnswer(step, prompt) {
  const key = answerKey(step, prompt);
  if (training.answers.has(key) || training.asked.has(key)) return;
  training.asked.add(key);
  const answer = await post("api/attention", { prompt, step });
  training.asked.delete(key);
  training.answers.set(key, answer);
  while (training.answers.size > KEPT_ANSWERS) {
    training.answers.delete(training.answers.keys().next().value);
  }
  renderSnapshotChanges();
}

function weightsOf(answer, layer, head) {
  return head === null ? answer.average[layer] : answer.weights[layer][head];
}

function fromPicker(from) {
  const label = el("label", t("training.changes_from") + " ");
  const select = el("select", null, { id: "changes-from" });
  select.append(el("option", t("training.changes_before"), { value: "" }));
  for (const s of training.snapshots) {
    select.append(el("option", t("training.at", { step: s.step, val_loss: s.val_loss.toFixed(3) }),
      { value: String(s.step) }));
  }
  select.value = training.from === null ? "" : String(from);
  select.addEventListener("change", () => {
    training.from = select.value === "" ? null : Number(select.value);
    renderSnapshotChanges();
  });
  label.append(select);
  return label;
}

// A (T, T) table of the prompt's characters, the masked future grey: "weights" in blue
// from 0 to 1, or a "difference" red where positive and blue where negative, as strong
// as |x| / the largest, with DIFFERENCE_DECIMALS (changes are often below 0.01).
function signedTable(values, labels, id, kind) {
  const scale = matrixScale(values);
  const decimals = kind === "difference" ? DIFFERENCE_DECIMALS : DECIMALS;
  const format = kind === "difference" ? formatChange : formatFixed;
  const table = el("table", null, { class: "weights", id, "data-kind": kind });
  const chars = el("tr");
  chars.append(el("th"), el("th"));
  for (const label of labels) chars.append(el("th", label, { class: "char" }));
  const head = el("thead");
  head.append(chars);
  const body = el("tbody");
  values.forEach((row, i) => {
    const tr = el("tr", null, { "data-row": i });
    tr.append(el("th", i, { class: "idx" }), el("th", labels[i], { class: "char" }));
    row.forEach((x, j) => {
      if (j > i && x === 0) {
        tr.append(el("td", format(x, decimals), { class: "future", title: t("table.future") }));
        return;
      }
      const td = el("td", format(x, decimals), { title: String(x) });
      const [r, g, b, a] = valueColor(x, kind, scale);
      td.style.background = `rgba(${r}, ${g}, ${b}, ${a.toFixed(3)})`;
      if (a > 0.55) td.style.color = "#fff";
      tr.append(td);
    });
    body.append(tr);
  });
  table.append(head, body);
  return table;
}

function renderSnapshotChanges() {
  const box = $("snapshot-changes");
  if (!state.result || training.snapshots.length === 0) { box.replaceChildren(); return; }
  const prompt = state.result.prompt;
  const from = changesFrom();
  const to = shownStep();
  const nodes = [el("h3", t("training.changes_title",
    { layer: state.layer, head: headName(state.head) }))];
  nodes.push(fromPicker(from));
  if (from === null) {
    nodes.push(el("p", t("training.changes_first"), { class: "muted" }));
    box.replaceChildren(...nodes);
    return;
  }
  const before = training.answers.get(answerKey(from, prompt));
  const after = training.answers.get(answerKey(to, prompt));
  if (!before || !after) {
    nodes.push(el("p", t("status.computing"), { class: "muted" }));
    box.replaceChildren(...nodes);
    askOwnAnswer(from, prompt);
    askOwnAnswer(to, prompt);
    return;
  }
  const failed = [before, after].find((answer) => answer.error !== undefined);
  if (failed) {
    nodes.push(el("p", failed.message ? tm(failed.message) : failed.error, { class: "error" }));
    box.replaceChildren(...nodes);
    return;
  }
  const a = weightsOf(before, state.layer, state.head);
  const b = weightsOf(after, state.layer, state.head);
  const difference = b.map((row, i) => row.map((x, j) => x - a[i][j]));
  nodes.push(el("p", t("training.changes_help", { from: stepName(from), to: stepName(to) }),
    { class: "muted", id: "changes-help" }));
  let largest = { value: 0, row: 0, column: 0 };
  difference.forEach((row, i) => row.forEach((x, j) => {
    if (Math.abs(x) > Math.abs(largest.value)) largest = { value: x, row: i, column: j };
  }));
  const scroll = el("div", null, { class: "scroll labelled" });
  scroll.append(signedTable(difference, after.labels, "changes-table", "difference"));
  nodes.push(scroll);
  if (to === undefined && training.from === null && finishedIsLastSnapshot()) {
    nodes.push(el("p", t("training.changes_finished", { step: MODEL.step }),
      { class: "muted", id: "changes-finished" }));
  }
  nodes.push(el("p", t("training.changes_largest", {
    value: formatChange(largest.value, DERIVATION_DECIMALS),
    row: after.labels[largest.row], column: after.labels[largest.column],
  }), { class: "muted" }));
  box.replaceChildren(...nodes);
}
