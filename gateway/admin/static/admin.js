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

  // <form data-confirm="..."> (or its submit button with data-confirm) asks before it is sent.
  document.addEventListener("submit", function (event) {
    var form = event.target;
    var button = event.submitter;
    var question = button && button.getAttribute("data-confirm") ||
      form.getAttribute && form.getAttribute("data-confirm");
    if (question && !window.confirm(question)) {
      event.preventDefault();
    }
  });

  // Times: the page has them in UTC (<time datetime="..." title="... UTC">); show them in the
  // viewer's local time, keeping UTC on hover.
  function pad(n) {
    return (n < 10 ? "0" : "") + n;
  }

  function zoneName(date) {
    try {
      var parts = new Intl.DateTimeFormat(undefined, {timeZoneName: "short"}).formatToParts(date);
      for (var i = 0; i < parts.length; i++) {
        if (parts[i].type === "timeZoneName") {
          return parts[i].value;
        }
      }
    } catch (e) {
      // an old browser: no zone name
    }
    return "local";
  }

  function localTimes(root) {
    root.querySelectorAll("time[datetime]").forEach(function (t) {
      if (t.getAttribute("data-local")) {
        return;
      }
      var d = new Date(t.getAttribute("datetime"));
      if (isNaN(d.getTime())) {
        return;
      }
      t.textContent = d.getFullYear() + "-" + pad(d.getMonth() + 1) + "-" + pad(d.getDate()) +
        " " + pad(d.getHours()) + ":" + pad(d.getMinutes()) + ":" + pad(d.getSeconds()) +
        " " + zoneName(d);
      t.setAttribute("data-local", "1");
    });
  }

  // <div data-when="schedule=crontab">: its fields are disabled unless the form's input named
  // schedule with value crontab is checked; <fieldset data-when="use.redrive">: unless the box
  // named use.redrive is ticked. Disabled fields are not sent.
  function applyWhen(root) {
    root.querySelectorAll("[data-when]").forEach(function (el) {
      var rule = el.getAttribute("data-when").split("=");
      var form = el.closest("form");
      if (!form) {
        return;
      }
      var on = false;
      form.querySelectorAll('input[name="' + rule[0] + '"]').forEach(function (input) {
        if (input.checked && (rule.length < 2 || input.value === rule[1])) {
          on = true;
        }
      });
      el.querySelectorAll("input, select, textarea").forEach(function (input) {
        if (input.name !== rule[0]) {
          input.disabled = !on;
        }
      });
      el.classList.toggle("off", !on);
    });
  }

  function enhance(root) {
    localTimes(root);
    applyWhen(root);
  }

  document.addEventListener("change", function (event) {
    if (event.target.form) {
      applyWhen(event.target.form);
    }
  });
  document.addEventListener("htmx:afterSwap", function (event) {
    enhance(event.detail.target.parentNode || document);
  });
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", function () {
      enhance(document);
    });
  } else {
    enhance(document);
  }
})();
