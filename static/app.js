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
