// Adds a link to the same page in the other edition of the book, at the right of the menu bar.
// The English book is built into book/book/ and the Chinese one into its zh-CN/ folder (see the README), so
// a page's counterpart is found from the page's own file name; nothing is fetched.
(function () {
    "use strict";
    var buttons = document.querySelector("#mdbook-menu-bar .right-buttons");
    if (!buttons || typeof path_to_root !== "string") {
        return;
    }
    var page = window.location.pathname.split("/").pop() || "index.html";
    var chinese = document.documentElement.lang === "zh-CN";
    var link = document.createElement("a");
    link.className = "language-switch";
    link.href = path_to_root + (chinese ? "../" : "zh-CN/") + page;
    link.hreflang = chinese ? "en" : "zh-CN";
    link.lang = chinese ? "en" : "zh-CN";
    link.textContent = chinese ? "English" : "中文";
    link.title = chinese ? "Read this page in English" : "阅读本页的中文版";
    buttons.insertBefore(link, buttons.firstChild);
})();
