// Regenerates the hyparquet_*.parquet fixtures with an independent writer
// (hyparquet-writer, pure JS), shaped like Hugging Face chat/text datasets.
//   npm install --prefix /tmp/pqgen hyparquet-writer@0.17.0
//   HYPARQUET_WRITER=/tmp/pqgen/node_modules/hyparquet-writer/src/index.js \
//     node tests/data/parquet/make_fixtures.mjs tests/data/parquet
// hyparquet-writer writes DATA_PAGE_V2 pages. The expected values are
// asserted in worker/io/dataset/parquet_reader_test.cc.
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'

const { parquetWriteBuffer } = await import(process.env.HYPARQUET_WRITER ?? 'hyparquet-writer')
const out = process.argv[2] ?? '.'

const text = ['hello world', '', 'naïve café — 日本語 🙂', null, 'last row']
const ids = [[1, 2, 3], [], [2147483647, -5], null, [42]]
const messages = [
  [{ role: 'user', content: 'Hi' }, { role: 'assistant', content: 'Hello! 👋' }],
  [],
  [{ role: 'system', content: '' }],
  null,
  [{ role: 'user', content: 'a' }, { role: 'assistant', content: 'b' }, { role: 'user', content: 'c' }],
]

// list<struct<content: string, role: string>> in the 3-level LIST form
// pyarrow writes; text and ids use the same shapes as HF datasets.
const schema = [
  { name: 'root', num_children: 3 },
  { name: 'text', type: 'BYTE_ARRAY', converted_type: 'UTF8', repetition_type: 'OPTIONAL' },
  { name: 'ids', repetition_type: 'OPTIONAL', converted_type: 'LIST', num_children: 1 },
  { name: 'list', repetition_type: 'REPEATED', num_children: 1 },
  { name: 'element', type: 'INT32', repetition_type: 'REQUIRED' },
  { name: 'messages', repetition_type: 'OPTIONAL', converted_type: 'LIST', num_children: 1 },
  { name: 'list', repetition_type: 'REPEATED', num_children: 1 },
  { name: 'element', repetition_type: 'OPTIONAL', num_children: 2 },
  { name: 'content', type: 'BYTE_ARRAY', converted_type: 'UTF8', repetition_type: 'OPTIONAL' },
  { name: 'role', type: 'BYTE_ARRAY', converted_type: 'UTF8', repetition_type: 'OPTIONAL' },
]

function write(file, options) {
  const buf = parquetWriteBuffer({
    columnData: [
      { name: 'text', data: text },
      { name: 'ids', data: ids },
      { name: 'messages', data: messages },
    ],
    schema,
    ...options,
  })
  writeFileSync(join(out, file), new Uint8Array(buf))
}

// Defaults: snappy, dictionary encoding where it pays, one row group.
write('hyparquet_chat.parquet', {})
// Uncompressed, two rows per row group, so rows span row groups.
write('hyparquet_chat_rowgroups.parquet', { codec: 'UNCOMPRESSED', rowGroupSize: 2, statistics: false })

// Many repeated strings: dictionary pages; plus delta-encoded columns.
const n = 300
const labels = Array.from({ length: n }, (_, i) => ['alpha', 'beta', 'gamma'][i % 3])
const counts = Array.from({ length: n }, (_, i) => BigInt(i * i - 1000))
const words = Array.from({ length: n }, (_, i) => `prefix_${i}`)
writeFileSync(join(out, 'hyparquet_encodings.parquet'), new Uint8Array(parquetWriteBuffer({
  columnData: [
    { name: 'label', data: labels, type: 'STRING', nullable: false },
    { name: 'count', data: counts, type: 'INT64', nullable: false, encoding: 'DELTA_BINARY_PACKED' },
    { name: 'word', data: words, type: 'STRING', nullable: false, encoding: 'DELTA_BYTE_ARRAY' },
    { name: 'score', data: Array.from({ length: n }, (_, i) => i / 4), type: 'DOUBLE', nullable: false, encoding: 'BYTE_STREAM_SPLIT' },
  ],
  pageSize: 512,
})))

// Nested records over many small pages and three row groups: null lists,
// empty lists, null struct fields; parquet_reader_test checks it by formula.
const m = 200
const pagedIds = Array.from({ length: m }, (_, i) =>
  i % 11 === 5 ? null : Array.from({ length: i % 9 }, (_, k) => BigInt(i * 100 + k)))
const pagedMessages = Array.from({ length: m }, (_, i) =>
  i % 7 === 3 ? null : Array.from({ length: i % 5 }, (_, k) =>
    ({ role: k % 2 ? 'assistant' : 'user', content: k === 2 ? null : `m${i}.${k}` })))
writeFileSync(join(out, 'hyparquet_paged.parquet'), new Uint8Array(parquetWriteBuffer({
  columnData: [{ name: 'ids', data: pagedIds }, { name: 'messages', data: pagedMessages }],
  schema: [
    { name: 'root', num_children: 2 },
    { name: 'ids', repetition_type: 'OPTIONAL', converted_type: 'LIST', num_children: 1 },
    { name: 'list', repetition_type: 'REPEATED', num_children: 1 },
    { name: 'element', type: 'INT64', repetition_type: 'REQUIRED' },
    ...schema.slice(5),
  ],
  pageSize: 64,
  rowGroupSize: 90,
})))

// A Hugging Face-style chat and text dataset over the bundled TinyStories
// sample (//tests/e2e:hub_dataset_e2e_test serves it from the fake Hub):
// `text` is each paragraph, `messages` a user turn and the next paragraph as
// the assistant's answer. Snappy, dictionary where it pays, two row groups.
const paragraphs = readFileSync(join(out, '..', 'tinystories-sample.txt'), 'utf8')
  .split('\n\n').filter((p) => p.length > 0).slice(0, 96)
writeFileSync(join(out, 'tinystories_chat.parquet'), new Uint8Array(parquetWriteBuffer({
  columnData: [
    { name: 'text', data: paragraphs },
    { name: 'messages', data: paragraphs.map((p, i) => [
      { role: 'user', content: `Tell me story ${i}.` },
      { role: 'assistant', content: p },
    ]) },
  ],
  schema: [
    { name: 'root', num_children: 2 },
    schema[1],
    ...schema.slice(5),
  ],
  rowGroupSize: 48,
})))
