// A small markdown renderer for OCR results. The whole text is HTML-escaped first, so nothing in it can
// become markup; the only tags in the output are the ones this file writes, plus the table tags
// LightOnOCR emits for tables, rebuilt with no attribute but a numeric colspan or rowspan.
(function (root) {
  "use strict";

  const ESCAPES = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };
  // A table tag is rebuilt from its name and numeric spans alone; any other attribute is dropped.
  const TABLE_TAG = /&lt;(\/?)(table|thead|tbody|tfoot|tr|th|td|caption)(\s(?:(?!&gt;).)*?)?\s*\/?&gt;/gi;
  const PAGE_MARKER = /^&lt;!--\s*ocrq:page (\d+)(?: failed: (.*?))?\s*--&gt;\s*$/;
  const COMMENT = /&lt;!--.*?--&gt;/g;
  const FENCE = /^\s*(```|~~~)/;
  const HEADING = /^(#{1,6})\s+(.*?)\s*#*\s*$/;
  const RULE = /^\s*(?:(?:\*\s*){3,}|(?:-\s*){3,}|(?:_\s*){3,})$/;
  const QUOTE = /^\s*&gt;\s?(.*)$/;
  const ITEM = /^(\s*)([-*+]|\d{1,9}[.)])\s+(.*)$/;
  const PIPE_SEPARATOR = /^\s*\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$/;

  function escapeHtml(text) {
    return text.replace(/[&<>"']/g, (c) => ESCAPES[c]);
  }

  // Code spans and links are set aside while emphasis is applied, so `*` inside them stays literal.
  function inline(text) {
    const kept = [];
    const keep = (html) => `\u0000${kept.push(html) - 1}\u0000`;
    let out = text.replace(/`([^`]+)`/g, (_, code) => keep(`<code>${code}</code>`));
    out = out.replace(/!?\[([^\]]*)\]\(([^)\s]+)\)/g, (_, label, url) => keep(link(url, label)));
    out = out
      .replace(/\*\*(?=\S)(.+?)\*\*/g, "<strong>$1</strong>")
      .replace(/__(?=\S)(.+?)__/g, "<strong>$1</strong>")
      .replace(/(^|[^*\w])\*(?=\S)([^*]+?)\*(?![*\w])/g, "$1<em>$2</em>")
      .replace(/~~(?=\S)(.+?)~~/g, "<del>$1</del>")
      .replace(/&lt;br\s*\/?&gt;/gi, "<br>")
      .replace(COMMENT, "");
    // A link's label may hold a code span: restore until no placeholder is left.
    for (let pass = 0; pass < 3 && out.includes("\u0000"); pass++) {
      out = out.replace(/\u0000(\d+)\u0000/g, (_, i) => kept[Number(i)]);
    }
    return out;
  }

  // The URL was escaped with the rest, so it cannot close the attribute; only web and mail links are made.
  function link(url, label) {
    const text = label || url;
    if (!/^(https?:\/\/|mailto:)/i.test(url)) return text;
    return `<a href="${url}" rel="noopener noreferrer nofollow" target="_blank">${text}</a>`;
  }

  function restoreTableTags(html) {
    return html.replace(TABLE_TAG, (_, close, tag, attrs) => {
      const spans = [];
      (attrs || "").replace(/\b(colspan|rowspan)=(?:&quot;|&#39;)?(\d{1,3})\b/gi, (_m, name, n) => {
        spans.push(` ${name.toLowerCase()}="${Number(n)}"`);
        return "";
      });
      return `<${close}${tag.toLowerCase()}${close ? "" : spans.join("")}>`;
    });
  }

  function pipeCells(line) {
    return line.trim().replace(/^\|/, "").replace(/\|$/, "").split("|").map((cell) => inline(cell.trim()));
  }

  function startsBlock(lines, i) {
    const line = lines[i];
    return (
      /^\s*$/.test(line) || PAGE_MARKER.test(line) || FENCE.test(line) || HEADING.test(line) ||
      RULE.test(line) || QUOTE.test(line) || ITEM.test(line) || /^\s*&lt;table/i.test(line) ||
      (line.includes("|") && i + 1 < lines.length && PIPE_SEPARATOR.test(lines[i + 1]))
    );
  }

  // `lines` are escaped already; returns HTML.
  function blocks(lines) {
    const out = [];
    let i = 0;
    while (i < lines.length) {
      const line = lines[i];
      let m;
      if (/^\s*$/.test(line)) {
        i++;
      } else if ((m = line.match(PAGE_MARKER))) {
        out.push(m[2] === undefined
          ? `<p class="page-marker">Page ${m[1]}</p>`
          : `<p class="page-failed">Page ${m[1]} could not be read: ${m[2]}</p>`);
        i++;
      } else if ((m = line.match(FENCE))) {
        const body = [];
        for (i++; i < lines.length && !lines[i].trim().startsWith(m[1]); i++) body.push(lines[i]);
        i++;
        out.push(`<pre><code>${body.join("\n")}</code></pre>`);
      } else if ((m = line.match(HEADING))) {
        out.push(`<h${m[1].length}>${inline(m[2])}</h${m[1].length}>`);
        i++;
      } else if (RULE.test(line)) {
        out.push("<hr>");
        i++;
      } else if (QUOTE.test(line)) {
        const inner = [];
        for (; i < lines.length && (m = lines[i].match(QUOTE)); i++) inner.push(m[1]);
        out.push(`<blockquote>${blocks(inner)}</blockquote>`);
      } else if ((m = line.match(ITEM))) {
        const ordered = /\d/.test(m[2]);
        const items = [];
        for (; i < lines.length; i++) {
          const item = lines[i].match(ITEM);
          if (item && /\d/.test(item[2]) === ordered) items.push(item[3]);
          else if (items.length && /^\s{2,}\S/.test(lines[i])) items[items.length - 1] += "\n" + lines[i].trim();
          else break;
        }
        const tag = ordered ? "ol" : "ul";
        out.push(`<${tag}>${items.map((text) => `<li>${inline(text)}</li>`).join("")}</${tag}>`);
      } else if (/^\s*&lt;table/i.test(line)) {
        const table = [];
        for (; i < lines.length; i++) {
          table.push(lines[i]);
          if (/&lt;\/table&gt;/i.test(lines[i])) { i++; break; }
        }
        out.push(`<div class="table">${restoreTableTags(inline(table.join("\n")))}</div>`);
      } else if (line.includes("|") && i + 1 < lines.length && PIPE_SEPARATOR.test(lines[i + 1])) {
        const head = pipeCells(line).map((c) => `<th>${c}</th>`).join("");
        const rows = [];
        for (i += 2; i < lines.length && lines[i].includes("|") && !/^\s*$/.test(lines[i]); i++) {
          rows.push(`<tr>${pipeCells(lines[i]).map((c) => `<td>${c}</td>`).join("")}</tr>`);
        }
        out.push(`<div class="table"><table><thead><tr>${head}</tr></thead><tbody>${rows.join("")}</tbody></table></div>`);
      } else {
        const para = [line];
        for (i++; i < lines.length && !startsBlock(lines, i); i++) para.push(lines[i]);
        out.push(`<p>${inline(para.join("\n"))}</p>`);
      }
    }
    return out.join("\n");
  }

  function render(markdown) {
    const text = String(markdown ?? "").replace(/\u0000/g, "").replace(/\r\n?/g, "\n");
    return blocks(escapeHtml(text).split("\n"));
  }

  root.ocrqMarkdown = { render, escapeHtml };
})(window);
