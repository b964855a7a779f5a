// The review queue by keyboard: every decision has a key (? lists them). j/k move between
// memories and on across pages; a approves, 1 / 2 settle a conflict (replace / keep both from
// the date filled in), r rejects with a reason, d rejects as a duplicate, e edits, u dismisses a
// hint as unrelated, o opens the source, x ticks for a bulk action, A / R decide everything the
// filter matches. No key that retires or rejects acts by itself: each asks, and Enter confirms
// (1 and d focus the button that does it and say what it does; A / R open a confirmation).
// After a decision focus moves to the next memory. Without this file every card still works
// with Tab and the buttons.
(() => {
  const cards = () => Array.from(document.querySelectorAll("#queue-items article.qitem"));
  const current = () => document.activeElement && document.activeElement.closest("article.qitem");
  // The card a decision was made on, and the one to focus once htmx has swapped in the result.
  let decided = null;
  let pendingFocus = null;
  // After moving to another page: focus its "first" or "last" memory once it has settled.
  let pageFocus = null;

  const focusCard = (card) => {
    if (!card) return;
    card.focus({ preventScroll: true });
    card.scrollIntoView({ block: "nearest" });
  };
  const follow = (rel, focus) => {
    const link = document.querySelector(`#queue nav.pager a[rel=${rel}]`);
    if (!link) return false;
    pageFocus = focus;
    decided = pendingFocus = null; // the new page decides where focus goes
    link.click(); // htmx swaps the page in (a plain link without it)
    return true;
  };
  const move = (step) => {
    const list = cards();
    const index = list.indexOf(current());
    if (index >= 0 && index + step >= list.length && follow("next", "first")) return;
    if (index === 0 && step < 0 && follow("prev", "last")) return;
    if (!list.length) return;
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

  // A conflict's choice: check it, and for "replace" approve at once; for "keep both" focus the
  // boundary (filled in by the server), where Enter approves.
  // Ask before a key acts: focus the button that does it and say so; Enter confirms, Esc (or
  // any other key) leaves it.
  const ask = (card, button, text) => {
    const hint = card.querySelector(".confirm-hint");
    if (hint) hint.textContent = text;
    button.focus();
  };
  const decide = (card, value) => {
    const form = card && actionForm(card, "approve");
    const radio = form && form.querySelector(`input[name=decision][value=${value}]`);
    if (!radio) return false;
    radio.checked = true;
    if (value === "replace") {
      const named = radio.closest("label").textContent.replace(/\s+/g, " ").replace(/ 1$/, "").trim();
      ask(card, form.querySelector("button[type=submit]"), `${named}? Enter approves and retires them; Esc goes back.`);
    } else {
      const field = form.querySelector("input[name=boundary]");
      field.focus();
      if (field.select) field.select();
    }
    return true;
  };
  // Approve; a conflict without a choice says which keys choose, instead of the browser's
  // "Please select one of these options".
  const approve = (card) => {
    const form = actionForm(card, "approve");
    if (!form) return;
    const radios = form.querySelectorAll("input[name=decision]");
    if (radios.length && !form.querySelector("input[name=decision]:checked")) {
      const hint = form.querySelector(".decide-hint");
      if (hint) hint.textContent = "Decide first: 1 replaces, 2 keeps both (then Enter), r rejects.";
      return;
    }
    form.requestSubmit(); // the submit listener below notes where to go next
  };
  const openSource = (card) => {
    const link = card.querySelector(".sources a[href]") || card.querySelector(".qhead a[href]");
    if (link) window.location.assign(link.href);
  };
  const matching = (id) => {
    const link = document.getElementById(id);
    if (link) link.click(); // the confirmation's button takes focus: Enter confirms
  };

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
    if (event.key === "Escape" && (typing(event.target) || event.target.matches("article.qitem button")) && current()) {
      const card = event.target.closest("article.qitem");
      const hint = card.querySelector(".confirm-hint");
      if (hint) hint.textContent = "";
      event.target.blur();
      focusCard(card);
      return;
    }
    // Enter in a "keep both" date approves (a date field does not submit by itself everywhere).
    if (event.key === "Enter" && event.target.matches("article.qitem input[name=boundary]")) {
      event.preventDefault();
      event.target.form.requestSubmit();
      return;
    }
    if (typing(event.target) || (dialog && dialog.open)) return;
    const card = current();
    // A card htmx has just swapped in keeps focus (same id) but its forms are bound only when the
    // swap settles; a key pressed before that would submit a plain form and leave the page.
    if (card && window.htmx) htmx.process(card);
    switch (event.key) {
      case "j": move(1); break;
      case "k": move(-1); break;
      case "n": if (!follow("next", "first")) return; break;
      case "p": if (!follow("prev", "first")) return; break;
      case "?": if (dialog) dialog.showModal(); break;
      case "/": {
        const field = document.querySelector("#queue-filters input[name=q]");
        if (!field) return;
        field.focus();
        break;
      }
      case "A": matching("approve-matching"); break;
      case "R": matching("reject-matching"); break;
      case "a": if (!card) return; approve(card); break;
      case "1": if (!decide(card, "replace")) return; break;
      case "2": if (!decide(card, "keep_both")) return; break;
      case "r": {
        const form = card && actionForm(card, "reject");
        if (form) form.querySelector("input[name=reason]").focus();
        break;
      }
      case "d": {
        const button = card && card.querySelector("button[data-duplicate]");
        if (!button) return;
        ask(card, button, `${button.textContent.trim()}? Enter rejects it; Esc goes back.`);
        break;
      }
      case "u": {
        const button = card && card.querySelector("button[data-unrelated]");
        if (!button) return;
        decided = card; // the card comes back without the hint: focus stays on it
        pendingFocus = null;
        button.form.requestSubmit();
        break;
      }
      case "e": {
        const edit = card && card.querySelector("details.edit");
        if (!edit) return;
        edit.open = true;
        edit.querySelector("textarea").focus();
        break;
      }
      case "o": if (!card) return; openSource(card); break;
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
  document.addEventListener("htmx:afterSettle", (event) => {
    if (pageFocus) {
      if (event.target.id !== "queue") return; // an earlier decision's swap settling late
      const list = cards();
      const card = pageFocus === "last" ? list[list.length - 1] : list[0];
      pageFocus = null;
      if (card) focusCard(card);
      return;
    }
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

  // Typing on a filter picks the option whose label starts with what was typed, or none: "cu"
  // picks "customer" when there is one and otherwise leaves the filter as it was — never
  // "contact", which the browser's own type-ahead picks on the "c" and filters by at once. The
  // filter applies once typing pauses.
  let typed = "", before = null, typedOn = null, typedTimer = null;
  document.addEventListener("keydown", (event) => {
    const select = event.target;
    if (!(select instanceof HTMLSelectElement) || !select.closest("#queue-filters")) return;
    if (event.ctrlKey || event.metaKey || event.altKey || event.key.length !== 1) return;
    if (event.key === " " && !typed) return; // space opens the list
    event.preventDefault();
    if (typedOn !== select) { typed = ""; before = select.value; typedOn = select; }
    typed += event.key.toLowerCase();
    const found = Array.from(select.options).find((o) => o.text.trim().toLowerCase().startsWith(typed));
    select.value = found ? found.value : before;
    clearTimeout(typedTimer);
    typedTimer = setTimeout(() => {
      const changed = select.value !== before;
      typed = ""; typedOn = null;
      if (changed) select.dispatchEvent(new Event("change", { bubbles: true }));
    }, 700);
  }, true);

  document.addEventListener("click", (event) => {
    if (!event.target.closest("[data-first-card]")) return;
    const first = cards()[0];
    if (first) { event.preventDefault(); focusCard(first); }
  });
})();
