// The review queue by keyboard: j/k move between memories, a/r/e approve, reject and edit the
// one in focus, x ticks it for a bulk action, ? lists the keys. After a decision focus moves to
// the next memory. Without this file every card still works with Tab and the buttons.
(() => {
  const cards = () => Array.from(document.querySelectorAll("#queue-items article.qitem"));
  const current = () => document.activeElement && document.activeElement.closest("article.qitem");
  // The card a decision was made on, and the one to focus once htmx has swapped in the result.
  let decided = null;
  let pendingFocus = null;

  const focusCard = (card) => {
    if (!card) return;
    card.focus({ preventScroll: true });
    card.scrollIntoView({ block: "nearest" });
  };
  const move = (step) => {
    const list = cards();
    if (!list.length) return;
    const index = list.indexOf(current());
    const next = index < 0 ? (step > 0 ? 0 : list.length - 1) : Math.min(Math.max(index + step, 0), list.length - 1);
    focusCard(list[next]);
  };
  const neighbour = (card) => {
    const list = cards();
    const index = list.indexOf(card);
    return list[index + 1] || list[index - 1] || null;
  };
  const typing = (el) => el && (el.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(el.tagName));
  const actionForm = (card, verb) => card.querySelector(`form[action$="/${verb}"]`);

  document.addEventListener("keydown", (event) => {
    if (event.ctrlKey || event.metaKey || event.altKey) {
      // Ctrl+Enter in the edit box saves the edit and approves.
      if (event.key === "Enter" && event.target.closest("details.edit textarea")) {
        event.preventDefault();
        event.target.form.requestSubmit();
      }
      return;
    }
    const dialog = document.getElementById("queue-keys");
    if (event.key === "Escape" && typing(event.target) && current()) {
      event.target.blur();
      focusCard(event.target.closest("article.qitem"));
      return;
    }
    if (typing(event.target) || (dialog && dialog.open)) return;
    const card = current();
    switch (event.key) {
      case "j": move(1); break;
      case "k": move(-1); break;
      case "?": if (dialog) dialog.showModal(); break;
      case "a": {
        if (!card) return;
        const form = actionForm(card, "approve");
        if (form) form.requestSubmit(); // the submit listener below notes where to go next
        break;
      }
      case "r": {
        const form = card && actionForm(card, "reject");
        if (form) form.querySelector("input[name=reason]").focus();
        break;
      }
      case "e": {
        const edit = card && card.querySelector("details.edit");
        if (!edit) return;
        edit.open = true;
        edit.querySelector("textarea").focus();
        break;
      }
      case "x": {
        const box = card && card.querySelector("input[type=checkbox][name=ids]");
        if (box) box.checked = !box.checked;
        break;
      }
      default: return;
    }
    event.preventDefault();
  });

  // A reject or edit submitted from inside a card (Enter in its field) also moves on.
  document.addEventListener("submit", (event) => {
    const card = event.target.closest("article.qitem");
    if (!card) return;
    decided = card;
    pendingFocus = neighbour(card);
  }, true);

  // Out-of-band swaps settle too; act once, when the decided card itself has been replaced.
  document.addEventListener("htmx:afterSettle", () => {
    if (!decided) return;
    const now = document.getElementById(decided.id);
    if (now === decided) return;
    if (now && now.matches("article.qitem")) {
      focusCard(now); // the decision was refused: stay on the card, its error is inside
    } else if (pendingFocus && document.contains(pendingFocus)) {
      focusCard(pendingFocus);
    } else {
      document.getElementById("main").focus();
    }
    decided = pendingFocus = null;
  });

  document.addEventListener("click", (event) => {
    if (!event.target.closest("[data-first-card]")) return;
    const first = cards()[0];
    if (first) { event.preventDefault(); focusCard(first); }
  });
})();
