// The page's words in Korean and English: the catalogue (viz/page/messages.json, sent in
// the "page-messages" block), the language shown, and a message as text or with its
// glossary links. The same rules as viz/messages.py: {name} placeholders, whose values
// may be messages themselves ({key, args}); [[term|words]] links to the glossary.
"use strict";

const WORDS = JSON.parse(document.getElementById("page-messages").textContent);
const LANGUAGES = ["ko", "en"];
const LINK = /\[\[([a-z_]+)\|([^\]]+)\]\]/g;
// A placeholder, with the particle written after it in its neutral form if any: {char}(이)가.
const PLACEHOLDER_PARTICLE = /\{([a-z_]+)\}(?:(['’]?)\((은|이|을|과|으)\)(는|가|를|와|로))?/g;

// ?lang= in the address, else the file's --lang, else the browser's first of ko and en.
function startLanguage() {
  const asked = new URLSearchParams(window.location.search).get("lang");
  if (LANGUAGES.includes(asked)) return asked;
  if (LANGUAGES.includes(WORDS.lang)) return WORDS.lang;
  for (const tag of navigator.languages || [navigator.language || "en"]) {
    const short = String(tag).slice(0, 2).toLowerCase();
    if (LANGUAGES.includes(short)) return short;
  }
  return "en";
}

let LANG = startLanguage();

function isMessage(value) {
  return value !== null && typeof value === "object" && typeof value.key === "string";
}

// The particle that fits the word before it: the form with a final consonant (은, 이, 을,
// 과, 으로) after a Hangul syllable that has one ((code − 0xAC00) % 28 ≠ 0), except 로
// after ㄹ (final 8); the other form after one without; the neutral "(은)는" after
// anything that is not a Hangul syllable; past a closing "(...)" and quotes, as Korean
// spelling does ("'다'(위치 9)가"). Same rule as viz/messages.py.
function particle(word, withFinal, withoutFinal) {
  word = word.replace(/['’"]*(?:\s*\([^()]*\))?$/, "") || word;
  const code = word.codePointAt(word.length - 1);
  if (!(code >= 0xac00 && code <= 0xd7a3)) return `(${withFinal})${withoutFinal}`;
  const final = (code - 0xac00) % 28;
  if (final === 0 || (withFinal === "으" && final === 8)) return withoutFinal;
  return withFinal === "으" ? "으로" : withFinal;
}

// A message's text in LANG, placeholders filled, links kept as [[term|words]].
function rawText(key, args) {
  const entry = WORDS.messages[key];
  if (!entry) return key; // tests/viz/test_messages.py holds every key used to the catalogue
  return entry[LANG].replace(PLACEHOLDER_PARTICLE, (all, name, quote, withFinal, withoutFinal) => {
    if (!args || !(name in args)) return all;
    const value = args[name];
    const word = isMessage(value) ? rawText(value.key, value.args) : String(value);
    return withFinal === undefined ? word : word + quote + particle(word, withFinal, withoutFinal);
  });
}

// A message as plain text (glossary links reduced to their words).
function t(key, args) {
  return rawText(key, args).replace(LINK, "$2");
}

// A {key, args} message from the server, as plain text.
function tm(message) {
  return t(message.key, message.args);
}

// A message as nodes: text, and each [[term|words]] a link to the glossary's entry.
// Text only ever through textContent (el), never parsed as HTML.
function rich(key, args) {
  const text = rawText(key, args);
  const nodes = [];
  let at = 0;
  for (const match of text.matchAll(LINK)) {
    if (match.index > at) nodes.push(document.createTextNode(text.slice(at, match.index)));
    nodes.push(el("a", match[2], { href: `#glossary-${match[1]}`, class: "term", "data-term": match[1] }));
    at = match.index + match[0].length;
  }
  if (at < text.length) nodes.push(document.createTextNode(text.slice(at)));
  return nodes;
}

// An element holding a message with its links.
function richEl(tag, key, args, attributes) {
  const node = el(tag, null, attributes);
  node.append(...rich(key, args));
  return node;
}

// The page's fixed words: each element with data-msg (its text, with links) and
// data-msg-placeholder (a text box's hint).
function applyStaticWords() {
  document.documentElement.lang = LANG;
  document.title = t("page.title");
  for (const node of document.querySelectorAll("[data-msg]")) {
    node.replaceChildren(...rich(node.dataset.msg));
  }
  for (const node of document.querySelectorAll("[data-msg-placeholder]")) {
    node.setAttribute("placeholder", t(node.dataset.msgPlaceholder));
  }
  for (const button of document.querySelectorAll("#languages button")) {
    button.setAttribute("aria-pressed", String(button.dataset.lang === LANG));
  }
}

// The visible switch: 한국어 | English. The choice goes into the address (?lang=), so a
// reload keeps it.
function renderLanguages() {
  const box = $("languages");
  box.replaceChildren();
  for (const [lang, name] of [["ko", "한국어"], ["en", "English"]]) {
    const button = el("button", name, { type: "button", "data-lang": lang, lang });
    button.addEventListener("click", () => switchLanguage(lang));
    box.append(button);
  }
}

function switchLanguage(lang) {
  if (!LANGUAGES.includes(lang)) return;
  LANG = lang;
  const params = new URLSearchParams(window.location.search);
  params.set("lang", lang);
  try {
    window.history.replaceState(null, "", `?${params}${window.location.hash}`);
  } catch (error) {
    // Some browsers refuse this for a file opened from disk: the switch still works.
  }
  redraw();
}
