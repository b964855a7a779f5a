// Small progressive enhancements; every page works without them.
document.addEventListener("click", (event) => {
  const toggle = event.target.closest("[data-check-all]");
  if (!toggle) return;
  const form = toggle.closest("form");
  form.querySelectorAll('input[type="checkbox"][name="' + toggle.dataset.checkAll + '"]')
    .forEach((box) => { box.checked = toggle.checked; });
});
