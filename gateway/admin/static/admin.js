// Jobgate admin UI: the little behaviour that is not htmx. Loaded as a file (the
// Content-Security-Policy allows no inline script); works on pages htmx has refreshed, since
// every handler is delegated from the document.
(function () {
  "use strict";

  function csrfToken() {
    var meta = document.querySelector('meta[name="csrf-token"]');
    return meta ? meta.getAttribute("content") : "";
  }

  // Every htmx request carries the session's CSRF token in a header.
  document.addEventListener("htmx:configRequest", function (event) {
    event.detail.headers["X-CSRF-Token"] = csrfToken();
  });

  // A live region is not refreshed while someone is using it: a box ticked or a field focused
  // inside it would be lost.
  document.addEventListener("htmx:beforeRequest", function (event) {
    var region = event.detail.elt;
    if (!region.classList || !region.classList.contains("live")) {
      return;
    }
    var busy = region.querySelector("input[type=checkbox]:checked") ||
      region.contains(document.activeElement) && document.activeElement !== document.body;
    if (busy) {
      event.preventDefault();
    }
  });

  // "Select all" boxes: <input type=checkbox data-select-all="ids"> ticks every box named ids
  // in its form.
  document.addEventListener("change", function (event) {
    var box = event.target;
    var name = box.getAttribute && box.getAttribute("data-select-all");
    if (!name || !box.form) {
      return;
    }
    box.form.querySelectorAll('input[type=checkbox][name="' + name + '"]').forEach(function (b) {
      b.checked = box.checked;
    });
  });

  // <form data-confirm="..."> asks before it is sent.
  document.addEventListener("submit", function (event) {
    var form = event.target;
    var question = form.getAttribute && form.getAttribute("data-confirm");
    if (question && !window.confirm(question)) {
      event.preventDefault();
    }
  });
})();
