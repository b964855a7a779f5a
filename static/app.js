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
