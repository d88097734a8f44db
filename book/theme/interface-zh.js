// The Chinese edition's words for mdBook's own interface: the menu bar's buttons, the theme list, the
// search bar and its results, the chapter arrows, the copy buttons and the page-not-found page. mdBook
// writes them in English into every page and into its scripts; this script puts each one in Chinese when
// the page is the Chinese edition's (<html lang="zh-CN">), and changes nothing in the English one. Only
// exact matches change, so the chapters' own text is never touched. .ci/check_chinese_edition.py checks
// that every English word of the interface in the built Chinese pages is in this table, and that the
// pages show none of them once this script has run.
(function () {
    "use strict";
    if (document.documentElement.lang !== "zh-CN") {
        return;
    }
    // The table is strict JSON between these two lines (the check reads it).
    // BEGIN WORDS
    var WORDS = {
        "Toggle Table of Contents": "显示或隐藏目录",
        "Table of contents": "目录",
        "Change theme": "更换主题",
        "Themes": "主题",
        "Auto": "自动",
        "Light": "浅色",
        "Coal": "煤黑",
        "Navy": "海军蓝",
        "Search (`/`)": "搜索（`/`）",
        "Toggle Searchbar": "显示或隐藏搜索栏",
        "Search this book ...": "在本书中搜索……",
        "Search Result Teaser": "搜索结果摘要",
        "Print this book": "打印本书",
        "Page navigation": "翻页",
        "Previous chapter": "上一章",
        "Next chapter": "下一章",
        "Copy to clipboard": "复制到剪贴板",
        "Copied!": "已复制！",
        "Clipboard error!": "复制失败！",
        "Document not found (404)": "找不到页面（404）",
        "This URL is invalid, sorry. Please use the navigation bar or search to continue.":
            "抱歉，这个网址无效。请用导航栏或搜索继续阅读。"
    };
    // END WORDS
    // Two theme names, Rust and Ayu, are names, and stay as they are.
    var ATTRIBUTES = ["title", "aria-label", "placeholder"];

    function translateAttributes(root) {
        ATTRIBUTES.forEach(function (name) {
            root.querySelectorAll("[" + name + "]").forEach(function (element) {
                var chinese = WORDS[element.getAttribute(name)];
                if (chinese) {
                    element.setAttribute(name, chinese);
                }
            });
        });
    }

    // Text of the interface, not of a chapter: the theme list, the copy buttons' tooltips, and the
    // not-found page (mdBook's own, as the book has no 404.md).
    function translateText(root) {
        var elements = Array.from(root.querySelectorAll("#mdbook-theme-list button, .tooltiptext"));
        var notFound = document.getElementById("document-not-found-404");
        if (notFound) {
            elements.push(notFound.querySelector("a") || notFound);
            elements = elements.concat(Array.from(notFound.parentNode.querySelectorAll("p")));
        }
        elements.forEach(function (element) {
            var chinese = WORDS[element.textContent.trim()];
            if (chinese) {
                element.textContent = chinese;
            }
        });
    }

    // The search bar's summary line, which mdBook's searcher writes after each search.
    function searchSummary(text) {
        var none = /^No search results for '(.*)'\.$/.exec(text);
        if (none) {
            return "没有找到与“" + none[1] + "”相关的结果。";
        }
        var some = /^(\d+) search results? for '(.*)':$/.exec(text);
        return some ? "找到 " + some[1] + " 个与“" + some[2] + "”相关的结果：" : null;
    }

    function translateSearchSummary() {
        var header = document.getElementById("mdbook-searchresults-header");
        var chinese = header && searchSummary(header.textContent);
        if (chinese) {
            header.textContent = chinese;
        }
    }

    function translateAll() {
        translateAttributes(document);
        translateText(document);
        translateSearchSummary();
    }

    translateAll();
    // mdBook's scripts add some of their words later (search results, "Copied!"); each change is caught
    // here. A translated word matches no entry, so the observer's own changes end there.
    new MutationObserver(translateAll).observe(document.body, {
        subtree: true,
        childList: true,
        characterData: true
    });
})();
