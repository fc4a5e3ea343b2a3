// Parquet reference sets written with hyparquet-writer (and read back with
// hyparquet to check that the files hold what was meant), in the layout
// fsspec's LazyReferenceMapper reads and kerchunk's refs_to_dataframe
// writes: DIR/.zmetadata {"metadata": {...}, "record_size": N} and
// DIR/<var>/refs.<R>.parq with columns path, offset, size, raw, where the
// chunk key of linear C-order index L is row L % N of record L / N; only
// records that hold a key are written, each of N rows.
//
// convert SET.json OUT RECORD_SIZE [INLINE_KEY...]: OUT from a version 1
//   JSON reference set ({{name}} templates expanded); each INLINE_KEY's
//   ranged reference becomes its bytes, inline in raw (read from the file
//   beside SET.json).
// hostile OUT: a set whose keys are broken in the ways named in
//   integration/refs_parquet_test.go.

import fs from 'fs'
import path from 'path'
import { parquetWriteBuffer } from 'hyparquet-writer'
import { parquetReadObjects } from 'hyparquet'

function grid(zarray) {
  return zarray.shape.map((s, i) => Math.ceil(s / zarray.chunks[i]))
}

// writeSet writes meta (key → JSON value) and chunks (key → {path, offset,
// size} or {raw: Uint8Array}) as a Parquet set in out.
async function writeSet(out, recordSize, meta, chunks) {
  fs.mkdirSync(out, { recursive: true })
  fs.writeFileSync(path.join(out, '.zmetadata'), JSON.stringify({ metadata: meta, record_size: recordSize }))
  const records = new Map() // "field\0record" → rows
  for (const [key, ref] of Object.entries(chunks)) {
    const i = key.lastIndexOf('/')
    const field = key.slice(0, i)
    const zarray = meta[field + '/.zarray']
    if (!zarray) throw new Error('no .zarray for ' + key)
    const g = grid(zarray)
    const idx = g.length === 0 ? [] : key.slice(i + 1).split(zarray.dimension_separator || '.').map(Number)
    let l = 0
    idx.forEach((n, d) => { l = l * g[d] + n })
    const rec = Math.floor(l / recordSize)
    const id = field + '\0' + rec
    if (!records.has(id)) records.set(id, new Array(recordSize).fill(null))
    records.get(id)[l % recordSize] = ref
  }
  for (const [id, rows] of records) {
    const [field, rec] = id.split('\0')
    const columnData = [
      { name: 'path', type: 'STRING', data: rows.map((r) => (r && r.path !== undefined ? r.path : null)) },
      { name: 'offset', type: 'INT64', data: rows.map((r) => BigInt(r && r.offset !== undefined ? r.offset : 0)) },
      { name: 'size', type: 'INT64', data: rows.map((r) => BigInt(r && r.size !== undefined ? r.size : 0)) },
      { name: 'raw', type: 'BYTE_ARRAY', data: rows.map((r) => (r && r.raw ? r.raw : null)) },
    ]
    const buf = parquetWriteBuffer({ columnData })
    const p = path.join(out, field, `refs.${rec}.parq`)
    fs.mkdirSync(path.dirname(p), { recursive: true })
    fs.writeFileSync(p, new Uint8Array(buf))
    // hyparquet reads back what was meant
    const got = await parquetReadObjects({ file: buf, utf8: false })
    if (got.length !== rows.length) throw new Error(`${p}: ${got.length} rows read back, not ${rows.length}`)
    got.forEach((g, j) => {
      const r = rows[j]
      const want = {
        path: r && r.path !== undefined ? r.path : null,
        offset: BigInt(r && r.offset !== undefined ? r.offset : 0),
        size: BigInt(r && r.size !== undefined ? r.size : 0),
      }
      if (g.path !== want.path || BigInt(g.offset) !== want.offset || BigInt(g.size) !== want.size) {
        throw new Error(`${p} row ${j}: read back ${JSON.stringify(g, (k, v) => (typeof v === 'bigint' ? String(v) : v))}`)
      }
      if ((r && r.raw) ? !(g.raw && Buffer.from(g.raw).equals(Buffer.from(r.raw))) : g.raw !== null && g.raw !== undefined) {
        throw new Error(`${p} row ${j}: raw read back differs`)
      }
    })
  }
}

async function convert(setPath, out, recordSize, inline) {
  const set = JSON.parse(fs.readFileSync(setPath, 'utf8'))
  const refs = set.version === 1 ? set.refs : set
  const templates = set.templates || {}
  const meta = {}
  const chunks = {}
  for (const [key, v] of Object.entries(refs)) {
    const base = key.slice(key.lastIndexOf('/') + 1)
    if (base.startsWith('.z')) {
      meta[key] = typeof v === 'string' ? JSON.parse(v) : v
      continue
    }
    if (!Array.isArray(v)) throw new Error('an inline chunk in the JSON set: ' + key)
    const url = v[0].replace(/{{(\w+)}}/g, (_, n) => templates[n])
    if (inline.includes(key)) {
      const fd = fs.openSync(path.join(path.dirname(setPath), url), 'r')
      const b = Buffer.alloc(v[2])
      fs.readSync(fd, b, 0, v[2], v[1])
      fs.closeSync(fd)
      chunks[key] = { raw: new Uint8Array(b) }
    } else {
      chunks[key] = v.length === 1 ? { path: url } : { path: url, offset: v[1], size: v[2] }
    }
  }
  await writeSet(out, recordSize, meta, chunks)
}

async function hostile(out) {
  const zarray = { zarr_format: 2, shape: [4], chunks: [2], dtype: '|u1', compressor: null, filters: null, fill_value: 9, order: 'C' }
  const meta = { '.zgroup': { zarr_format: 2 } }
  for (const v of ['a', 'b', 'junk', 'trunc']) meta[v + '/.zarray'] = zarray
  await writeSet(out, 2, meta, {
    'a/0': { path: 'data.bin', offset: 6, size: 4 }, // past the end of data.bin's 8 bytes
    'a/1': { path: 'data.bin', offset: 0, size: 2n ** 63n - 1n },
    'b/1': { path: 'data.bin', offset: 0, size: 2 }, // b/0 is a null row: fill
    'junk/0': { path: 'data.bin', offset: 0, size: 2 },
    'trunc/0': { path: 'data.bin', offset: 0, size: 2 },
  })
  fs.writeFileSync(path.join(out, 'junk', 'refs.0.parq'), 'not a parquet file')
  const t = fs.readFileSync(path.join(out, 'trunc', 'refs.0.parq'))
  fs.writeFileSync(path.join(out, 'trunc', 'refs.0.parq'), t.subarray(0, t.length - 12))
}

const [cmd, ...args] = process.argv.slice(2)
if (cmd === 'convert') {
  await convert(args[0], args[1], Number(args[2]), args.slice(3))
} else if (cmd === 'hostile') {
  await hostile(args[0])
} else {
  throw new Error('usage: convert SET.json OUT RECORD_SIZE [KEY...] | hostile OUT')
}
console.log('ok')
