#!/usr/bin/env python3
"""Checks that every async test is under a time limit. Usage: test_timeouts.py DIR...

An async test is a function under `#[tokio::test]` (any arguments). Its body is split into
top-level statements; every statement that awaits must do so under a limit: it calls
`timeout(`, `within(` or one of the runners below, which apply one themselves. A test that
awaits anything at the top level without one (a `close().await` after the timed part, say)
could wait for ever when the code under test regresses, and hang CI instead of failing it.
Exits 1, listing each such test and its first unlimited statement."""
import os, re, sys

# Helpers that put their whole work under a limit (see each for its limit).
RUNNERS = ('timeout(', 'within(', 'run(', 'run_all_peer_scenarios(', 'run_on_python(')

def skip_literal(s, k):
    """If a string, char or comment starts at k, the index just past it; else None."""
    if s.startswith('//', k):
        end = s.find('\n', k)
        return len(s) if end < 0 else end
    if s.startswith('/*', k):
        return s.index('*/', k) + 2
    m = re.match(r'b?r(#*)"', s[k:k + 10])
    if m and (k == 0 or not (s[k - 1].isalnum() or s[k - 1] == '_')):
        end = s.index('"' + m.group(1), k + len(m.group(0)))
        return end + 1 + len(m.group(1))
    if s[k] == '"':
        k += 1
        while s[k] != '"':
            k += 2 if s[k] == '\\' else 1
        return k + 1
    if s[k] == "'":
        m = re.match(r"'(\\u\{[0-9a-fA-F]+\}|\\.|[^\\'])'", s[k:k + 12])
        if m:
            return k + len(m.group(0))
    return None

def statements(body):
    """The top-level statements of a block's inside, literals and comments blanked."""
    out, current, depth, k = [], [], 0, 0
    while k < len(body):
        past = skip_literal(body, k)
        if past is not None:
            current.append(' ')
            k = past
            continue
        c = body[k]
        current.append(c)
        if c in '([{':
            depth += 1
        elif c in ')]}':
            depth -= 1
            if depth == 0 and c == '}' and body[k + 1:k + 2] == '\n':
                out.append(''.join(current))
                current = []
        elif c == ';' and depth == 0:
            out.append(''.join(current))
            current = []
        k += 1
    out.append(''.join(current))
    return [s.strip() for s in out if s.strip()]

def body_of(s, start):
    """The inside of the body of the `fn` after index `start`, and where the fn is."""
    i = s.index('fn ', start)
    k, parens = i, 0
    while True:
        c = s[k]
        if c == '(':
            parens += 1
        elif c == ')':
            parens -= 1
        elif c == '{' and parens == 0:
            break
        k += 1
    open_at, depth = k, 0
    while True:
        past = skip_literal(s, k)
        if past is not None:
            k = past
            continue
        if s[k] == '{':
            depth += 1
        elif s[k] == '}':
            depth -= 1
            if depth == 0:
                return s[open_at + 1:k], s[i:open_at].split('(')[0][3:].strip()
        k += 1

def unlimited(path):
    s = open(path, encoding='utf-8').read()
    found = []
    for m in re.finditer(r'#\[tokio::test(\([^\]]*\))?\]', s):
        body, name = body_of(s, m.end())
        for statement in statements(body):
            # `let check = async { … };` only makes a future: it runs where it is awaited,
            # which is a statement of its own.
            if re.match(r'let \w+ = async\b', statement):
                continue
            if '.await' in statement and not any(r in statement for r in RUNNERS):
                line = s.count('\n', 0, m.start()) + 1
                found.append(f'{path}:{line}: {name}: {" ".join(statement.split())[:100]}')
                break
    return found

def main(dirs):
    found = []
    for top in dirs:
        for root, _, files in os.walk(top):
            if '/target' in root:
                continue
            for f in sorted(files):
                if f.endswith('.rs'):
                    found += unlimited(os.path.join(root, f))
    for line in found:
        print(line)
    if found:
        print(f'{len(found)} async tests await outside a time limit')
        return 1
    print('every async test awaits under a time limit')
    return 0

if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
