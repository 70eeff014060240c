// Hugging Face tokenizer files in a real consumer: @huggingface/tokenizers
// (the tokenizer of Transformers.js, following the Rust tokenizers crate)
// loads the tokenizer.json and tokenizer_config.json that quantd made for a
// GGUF vocabulary and tokenizes llama.cpp's test texts (VOCAB.gguf.inp); the
// ids must be the ones Hugging Face's own tokenizers gave (VOCAB.gguf.out).
//
//   node hf_tokenizer_check.mjs DIR VOCAB.gguf [DIR VOCAB.gguf ...]
// Prints one line per vocabulary; exits 1 when any text differs.
import {readFileSync} from "node:fs";
import {Tokenizer} from "@huggingface/tokenizers";

const args = process.argv.slice(2);
let failed = 0;
for (let i = 0; i + 1 < args.length; i += 2) {
  const [dir, vocab] = [args[i], args[i + 1]];
  const tokenizer = new Tokenizer(JSON.parse(readFileSync(`${dir}/tokenizer.json`, "utf8")),
                                  JSON.parse(readFileSync(`${dir}/tokenizer_config.json`, "utf8")));
  const texts = readFileSync(`${vocab}.inp`, "utf8").split("\n__ggml_vocab_test__\n");
  texts.pop();  // after the last separator
  const expected = readFileSync(`${vocab}.out`, "utf8").split("\n");
  let same = 0;
  texts.forEach((text, k) => {
    const want = expected[k].trim() === "" ? [] : expected[k].trim().split(/\s+/).map(Number);
    const got = tokenizer.encode(text, {add_special_tokens: false}).ids;
    if (JSON.stringify(got) === JSON.stringify(want)) {
      ++same;
    } else {
      ++failed;
      console.log(`  ${vocab}: [${text}] gave ${JSON.stringify(got)}, want ${JSON.stringify(want)}`);
    }
  });
  // With special tokens: BOS exactly when the config says it is added.
  const config = JSON.parse(readFileSync(`${dir}/tokenizer_config.json`, "utf8"));
  const withSpecial = tokenizer.encode("Hello world").ids;
  const plain = tokenizer.encode("Hello world", {add_special_tokens: false}).ids;
  const bosAdded = withSpecial.length === plain.length + 1;
  if (bosAdded !== Boolean(config.add_bos_token)) {
    ++failed;
    console.log(`  ${vocab}: BOS added ${bosAdded}, tokenizer_config.json says ${config.add_bos_token}`);
  }
  console.log(`${vocab}: ${same}/${texts.length} texts give Hugging Face's ids; BOS added ${bosAdded}`);
}
process.exit(failed === 0 ? 0 : 1);
