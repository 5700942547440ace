// Tables sent packed as float32 bytes (viz/array_encoding.py): the page asks for them
// ("encoding": "float32", a third of the JSON and far faster to write) and turns each
// back into the nested arrays the drawing reads, −∞ (the mask) as null, as in JSON.
"use strict";

function isPacked(value) {
  return value !== null && typeof value === "object" && value.dtype === "float32" &&
    Array.isArray(value.shape) && typeof value.data === "string";
}

// {dtype, shape, data}: little-endian float32, row-major, base64 -> nested arrays.
function unpackTable(packed) {
  const bytes = Uint8Array.from(atob(packed.data), (c) => c.charCodeAt(0));
  const flat = new Float32Array(bytes.buffer);
  let at = 0;
  const build = (depth) => {
    const out = new Array(packed.shape[depth]);
    for (let i = 0; i < out.length; i++) {
      if (depth + 1 < packed.shape.length) out[i] = build(depth + 1);
      else { const x = flat[at++]; out[i] = x === -Infinity ? null : x; }
    }
    return out;
  };
  return packed.shape.length === 0 ? flat[0] : build(0);
}

// An answer with every packed table in it unpacked, at any depth.
function unpackAnswer(value) {
  if (isPacked(value)) return unpackTable(value);
  if (Array.isArray(value)) return value.map(unpackAnswer);
  if (value !== null && typeof value === "object") {
    const out = {};
    for (const [key, item] of Object.entries(value)) out[key] = unpackAnswer(item);
    return out;
  }
  return value;
}
