// The console's shared rendering helpers: elements from data (never HTML strings), messages,
// busy buttons, confirmations, errors in words, times, lists that page, and a secret shown once.
// Every section module builds its view with these, so they look and behave alike.

import { errorWords } from './error-words.js';

const el = (id) => document.getElementById(id);
const notice = () => el('notice');
const problem = () => el('problem');

/** Creates an element; children are nodes or text (never parsed as HTML). */
export function h(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attributes)) {
    if (value === false || value === null || value === undefined) continue;
    if (key === 'class') node.className = value;
    else if (key === 'text') node.textContent = value;
    else if (key.startsWith('on')) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? '' : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(typeof child === 'string' ? document.createTextNode(child) : child);
  }
  return node;
}

/** Replaces `node`'s children with those given, leaving out the absent ones (null, undefined, false). */
export function fill(node, ...children) {
  node.replaceChildren(...children.flat().filter((child) => child !== null && child !== undefined && child !== false));
  return node;
}

/** Text for screen readers only, e.g. which item a "Revoke" button is about. */
export const hidden = (text) => h('span', { class: 'visually-hidden', text });

export function show(node, visible) {
  node.hidden = !visible;
}

// ---------------------------------------------------------------- messages

export function say(text) {
  problem().textContent = '';
  notice().textContent = text;
}

export function complain(text) {
  notice().textContent = '';
  problem().textContent = text;
}

export function clearMessages() {
  notice().textContent = '';
  problem().textContent = '';
}

// ---------------------------------------------------------------- words

const ROLE_NAMES = { owner: 'owner', admin: 'admin', member: 'member' };
export const roleName = (role) => ROLE_NAMES[role] ?? 'member';
export const capitalized = (text) => text.charAt(0).toUpperCase() + text.slice(1);

export function formatTime(iso) {
  if (!iso) return '';
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return iso;
  return date.toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'short' });
}

/** A `<time>` element showing `iso` in the reader's words. */
export const time = (iso) => h('time', { datetime: iso, text: formatTime(iso) });

/** An API failure in words a person can act on (the one table: error-words.js); `name` is the provider's display name, when one is concerned. */
export function describeError(error, name) {
  return errorWords('console', error, name);
}

// ---------------------------------------------------------------- controls

/**
 * Marks a control busy without `disabled`: a disabled button drops keyboard focus to the
 * page, while this keeps it where the person is. Busy controls ignore clicks.
 */
export function setBusy(control, busy) {
  if (!control) return;
  if (busy) control.setAttribute('aria-disabled', 'true');
  else control.removeAttribute('aria-disabled');
}

export const isBusy = (control) => control?.getAttribute('aria-disabled') === 'true';

/** Runs `action` with `button` busy (a second click meanwhile does nothing); a failure goes to `onError`. */
export async function whileBusy(button, action, onError) {
  if (isBusy(button)) return;
  setBusy(button, true);
  try {
    await action();
  } catch (error) {
    await onError(error);
  } finally {
    setBusy(button, false);
  }
}

/** A button: visible `label`, and `context` for screen readers (which item it acts on). */
export function actionButton(label, context, focusKey, onClick, { primary = false, danger = false } = {}) {
  return h(
    'button',
    {
      type: 'button',
      class: [primary ? 'primary' : '', danger ? 'danger' : ''].filter(Boolean).join(' '),
      'data-focus-key': focusKey,
      onclick: (event) => onClick(event.currentTarget),
    },
    label,
    context ? hidden(context) : null,
  );
}

/**
 * Asks before a destructive action, with the browser's own dialog: keyboard and
 * screen-reader friendly, and no page can style it into something else.
 */
export function confirmed(question) {
  return window.confirm(question);
}

/** The focus key of the focused control inside `container`, if any. */
export function focusedKey(container) {
  const focused = document.activeElement;
  return focused && container.contains(focused) ? focused.dataset?.focusKey : undefined;
}

/** Puts keyboard focus back on the control with that key, if it still exists. */
export function refocus(container, key) {
  if (key) container.querySelector(`[data-focus-key="${CSS.escape(key)}"]`)?.focus();
}

/** Replaces a node, keeping keyboard focus on the "same" control if it still exists. */
export function replaceKeepingFocus(oldNode, newNode) {
  const key = focusedKey(oldNode);
  oldNode.replaceWith(newNode);
  refocus(newNode, key);
}

/** A labelled form field: `<p class="field"><label for=id>…</label> control</p>`. */
export function field(label, control, hint) {
  const id = control.id;
  return h('p', { class: 'field' }, h('label', { for: id, text: label }), control, hint ? h('span', { class: 'hint', id: `${id}-hint`, text: hint }) : null);
}

/** A `<select>` of `[value, text]` pairs. */
export function select(id, options, chosen) {
  return h('select', { id, name: id }, ...options.map(([value, text]) => h('option', { value, selected: value === chosen, text })));
}

/** A section's heading (focusable, so moving between sections can put the reader there) with controls beside it. */
export function sectionHead(id, title, ...controls) {
  return h('div', { class: 'section-head' }, h('h1', { id: `${id}-title`, tabindex: '-1', text: title }), ...controls);
}

/** A status badge; `kind` picks its colour (connected, warning, expired, invalid, pending, delivered, failed, …). */
export function badge(kind, text, context = 'Status: ') {
  return h('span', { class: `badge badge-${kind}` }, hidden(context), text);
}

/** Facts as a definition list: `[term, value]` pairs; a value may be a node; empty values are left out. */
export function facts(pairs) {
  const items = [];
  for (const [term, value] of pairs) {
    if (value === null || value === undefined || value === '') continue;
    items.push(h('dt', { text: term }), h('dd', {}, value));
  }
  return h('dl', { class: 'facts' }, items);
}

/**
 * A Copy button for `value` (shown in `shown`, a node on the page): to the clipboard, or, where
 * there is none (an insecure origin), selected for a manual copy. `label` says what it copies.
 */
export function copyButton(label, value, shown, focusKey) {
  return actionButton('Copy', ` ${label}`, focusKey, async (button) => {
    try {
      await navigator.clipboard.writeText(value);
      say(`${capitalized(label)} copied.`);
    } catch {
      getSelection()?.selectAllChildren(shown);
      say('Press Ctrl+C (⌘C) to copy the selected text.');
    }
    button.focus();
  });
}

/**
 * A secret shown once (a new token's value, a connect link): selectable text, a Copy button, and
 * the warning that it is not shown again.
 */
export function shownOnce(label, value, id) {
  const output = h('output', { id, class: 'secret', text: value });
  const copy = copyButton(label, value, output, `copy:${id}`);
  return h(
    'div',
    { class: 'shown-once', role: 'group', 'aria-labelledby': `${id}-label` },
    h('p', { id: `${id}-label`, class: 'shown-once-label' }, h('strong', { text: `Your ${label}` }), ' — copy it now: it is not shown again.'),
    output,
    h('div', { class: 'actions' }, copy),
  );
}

// ---------------------------------------------------------------- lists that page

/**
 * A list that pages: `items` shown `size` at a time with Previous/Next, or (a cursor list) the
 * server's page with `next`/`previous` callbacks. `render` makes one `<li>`; `empty` is said when
 * there is nothing. Returns the block to insert.
 */
export function pagedList({ label, items, render, empty, size = 20, page = 0, cursor = null, onPage, listClass = 'rows' }) {
  const serverPaged = cursor !== null;
  const shown = serverPaged ? items : items.slice(page * size, (page + 1) * size);
  const hasPrevious = serverPaged ? cursor.hasPrevious : page > 0;
  const hasNext = serverPaged ? cursor.hasNext : (page + 1) * size < items.length;
  const list = h('ul', { class: listClass, 'aria-label': label }, shown.map(render));
  const nothing = h('p', { class: 'muted', text: empty });
  const block = h('div', { class: 'paged' }, shown.length ? list : nothing);
  if (hasPrevious || hasNext) {
    const where = serverPaged ? `Page ${cursor.number}` : `${page * size + 1}–${page * size + shown.length} of ${items.length}`;
    block.append(
      h(
        'nav',
        { class: 'pager', 'aria-label': `${label}: pages` },
        actionButton('Previous', ` page of ${label.toLowerCase()}`, `${label}:previous`, () => hasPrevious && onPage(-1), {}),
        h('span', { class: 'muted', 'aria-live': 'polite', text: where }),
        actionButton('Next', ` page of ${label.toLowerCase()}`, `${label}:next`, () => hasNext && onPage(1), {}),
      ),
    );
    // Not `disabled`: a disabled button drops keyboard focus; this one keeps it and does nothing.
    const [previous, , next] = block.lastChild.children;
    if (!hasPrevious) previous.setAttribute('aria-disabled', 'true');
    if (!hasNext) next.setAttribute('aria-disabled', 'true');
  }
  return block;
}

/**
 * Cursor paging state for a server list: the cursors of the pages seen so far, so that
 * Previous goes back without the server knowing how.
 */
export class Cursor {
  constructor() {
    this.reset();
  }

  reset() {
    this.cursors = [null];
    this.index = 0;
    this.hasNext = false;
    this.endCursor = null;
  }

  /** The `after` of the current page (null for the first). */
  get after() {
    return this.cursors[this.index];
  }

  /** Records the answer's pageInfo. */
  seen(pageInfo) {
    this.hasNext = pageInfo.hasNextPage;
    this.endCursor = pageInfo.endCursor;
  }

  move(step) {
    if (step > 0 && this.hasNext && this.endCursor) {
      this.cursors = [...this.cursors.slice(0, this.index + 1), this.endCursor];
      this.index += 1;
    } else if (step < 0 && this.index > 0) this.index -= 1;
  }

  /** What `pagedList` needs to draw the pager. */
  get view() {
    return { hasPrevious: this.index > 0, hasNext: this.hasNext, number: this.index + 1 };
  }
}
