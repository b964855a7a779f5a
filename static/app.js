// Small progressive enhancements; every page works without them.
document.addEventListener("click", (event) => {
  const toggle = event.target.closest("[data-check-all]");
  if (!toggle) return;
  // form.elements also holds checkboxes placed outside the form with form="…".
  const form = toggle.form || toggle.closest("form");
  Array.from(form.elements)
    .filter((el) => el.type === "checkbox" && el.name === toggle.dataset.checkAll)
    .forEach((box) => { box.checked = toggle.checked; });
});

// The Content-Security-Policy forbids inline handlers, so pages mark behaviour with data-*:
// data-autosubmit submits its form on change; data-confirm asks before its form is submitted.
document.addEventListener("change", (event) => {
  const field = event.target.closest("[data-autosubmit]");
  if (field && field.form) field.form.requestSubmit();
});
document.addEventListener("submit", (event) => {
  const form = event.target.closest("form[data-confirm]");
  if (form && !window.confirm(form.dataset.confirm)) event.preventDefault();
});

// Navigation groups are <details> disclosures: opening one closes the others, and a click
// elsewhere or Escape closes them (without JavaScript each stays open until clicked again).
const navGroups = () => Array.from(document.querySelectorAll("details[data-navgroup]"));
document.addEventListener("toggle", (event) => {
  const group = event.target;
  if (!group.matches || !group.matches("details[data-navgroup]") || !group.open) return;
  navGroups().forEach((other) => { if (other !== group) other.open = false; });
}, true);
document.addEventListener("click", (event) => {
  if (event.target.closest("details[data-navgroup]")) return;
  navGroups().forEach((group) => { group.open = false; });
});
document.addEventListener("keydown", (event) => {
  if (event.key !== "Escape") return;
  const open = navGroups().find((group) => group.open);
  if (!open) return;
  open.open = false;
  open.querySelector("summary").focus();
});
