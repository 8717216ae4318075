#!/usr/bin/env python3
"""Checks that no module of a crate imports, directly or through others, a module that imports
it back. Usage: module_cycles.py [-v] SRC_DIR...  (-v prints every module's edges).

An edge A -> B is a path in A's code (not its comments or its `#[cfg(test)] mod tests`) that
names B: `crate::b::…`, `super::…`, `self::…`, or a child `b::…`. A path through a `pub use`
re-export counts for the module the item comes from, the crate root's included (`crate::Client`
is an edge to the module `lib.rs` takes `Client` from). Exits 1 when a crate has a cycle."""
import os, re, sys

def check(crate_src, verbose):
  mods = {}
  for root, _, files in os.walk(crate_src):
      for f in files:
          if not f.endswith('.rs'): continue
          path = os.path.join(root, f)
          rel = os.path.relpath(path, crate_src)[:-3]
          parts = rel.split(os.sep)
          if parts[-1] in ('mod', 'lib', 'main'): parts = parts[:-1]
          mods['::'.join(parts)] = path
  def resolve(segs):
      for n in range(len(segs), 0, -1):
          name = '::'.join(segs[:n])
          if name in mods: return name
      # `crate::Item`: the crate root, whose re-exports `follow` resolves to their module.
      return '' if '' in mods else None
  def expand(tree):
      # expand a use tree "a::{b, c::{d}}" into paths
      tree = tree.strip()
      m = re.match(r'^([\w:]*?)(::)?\{(.*)\}$', tree, re.S)
      if not m: return [tree]
      prefix, inner = m.group(1), m.group(3)
      out, depth, cur = [], 0, ''
      for ch in inner:
          if ch == '{': depth += 1
          if ch == '}': depth -= 1
          if ch == ',' and depth == 0:
              out.append(cur); cur = ''
          else: cur += ch
      out.append(cur)
      res = []
      for o in out:
          o = o.strip()
          if not o: continue
          for e in expand(o):
              res.append(prefix + ('::' if prefix else '') + e)
      return res
  # re-exports: (module, item) -> the module the item comes from
  reexp = {}
  for mod, path in mods.items():
      text = re.sub(r'//[^\n]*', '', open(path).read())
      for m in re.finditer(r'\bpub(?:\([\w:]+\))?\s+use\s+([^;]+);', text):
          for p in expand(m.group(1)):
              p = re.sub(r'\s+as\s+\w+$', '', p.strip())
              segs = p.split('::')
              if segs[0] in ('crate', 'super', 'self'):
                  continue
              item = segs[-1]
              src = resolve((mod.split('::') if mod else []) + segs[:-1])
              if src and src != mod:
                  reexp[(mod, item)] = src
  def follow(t, rest):
      seen = 0
      while rest and (t, rest[0]) in reexp and seen < 10:
          t = reexp[(t, rest[0])]; seen += 1
      return t
  edges = {m: set() for m in mods}
  for mod, path in mods.items():
      text = open(path).read()
      # drop test modules and comments
      text = re.sub(r'#\[cfg\(test\)\]\s*mod tests \{.*', '', text, flags=re.S)
      text = re.sub(r'//[^\n]*', '', text)
      here = mod.split('::') if mod else []
      paths = []
      for m in re.finditer(r'\buse\s+([^;]+);', text):
          paths += expand(m.group(1))
      paths += re.findall(r'(?<![\w$])(?:crate|super)(?:::\w+)+', text)
      # relative paths into this module's own children (`child::item`, `use child::…`)
      children = {k.split('::')[-1] for k in mods if k.startswith(mod + '::' if mod else '') and k.count('::') == (mod.count('::') + 1 if mod else 0)}
      for c in children:
          for m2 in re.finditer(r'(?<![\w:])' + re.escape(c) + r'::\w+', text):
              paths.append('self::' + m2.group(0))
      for p in paths:
          p = re.sub(r'\s+as\s+\w+$', '', p.strip())
          segs = p.split('::')
          if segs[0] == 'crate': segs = segs[1:]
          elif segs[0] == 'super':
              base = here[:]
              if not path.endswith(('mod.rs', 'lib.rs')): pass
              while segs and segs[0] == 'super':
                  base = base[:-1]; segs = segs[1:]
              segs = base + segs
          elif segs[0] == 'self':
              segs = here + segs[1:]
          else: continue
          t = resolve(segs)
          if t is not None:
              n = len(t.split('::')) if t else 0
              t = follow(t, segs[n:])
          if t is not None and t != mod and t != '':
              edges[mod].add(t)
  if verbose:
      for m in sorted(edges):
          print(f"{m or '(root)'} -> {', '.join(sorted(edges[m]))}")
  # cycles: Tarjan SCC
  index, low, stack, on, sccs, i = {}, {}, [], set(), [], [0]
  def strong(v):
      index[v] = low[v] = i[0]; i[0] += 1; stack.append(v); on.add(v)
      for w in edges[v]:
          if w not in index: strong(w); low[v] = min(low[v], low[w])
          elif w in on: low[v] = min(low[v], index[w])
      if low[v] == index[v]:
          c = []
          while True:
              w = stack.pop(); on.discard(w); c.append(w)
              if w == v: break
          if len(c) > 1: sccs.append(c)
  for v in edges:
      if v not in index: strong(v)
  print(f"{crate_src}: {len(mods)} modules, " + (f"CYCLES {sccs}" if sccs else "no cycle"))
  return not sccs

verbose = '-v' in sys.argv[1:]
dirs = [a for a in sys.argv[1:] if a != '-v']
ok = all([check(d, verbose) for d in dirs])
sys.exit(0 if ok else 1)
