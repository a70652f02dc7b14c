// Annotation table cases of the rewrites family (rewrite-target, app-root, redirects):
// controller/translate/annotations/rewrites.cc. Shared parts: table.h.

#include "table.h"

namespace tidegate::controller::translate::annotation_table {

using namespace std::chrono_literals;

std::vector<Case> rewrites_cases() {
  return {
      // ---- rewrite-target, app-root, redirects ----
      {"rewrite-target with groups on regex paths",
       A({{"rewrite-target", "/$2"}}),
       [](IngressPolicy& p) { p.route.mut().rewrite_target = "/$2"; },
       {},
       regex_paths()},
      {"rewrite-target without groups on plain paths", A({{"rewrite-target", "/"}}),
       [](IngressPolicy& p) { p.route.mut().rewrite_target = "/"; }},
      {"rewrite-target group beyond a path's captures",
       A({{"rewrite-target", "/$3"}}),
       {},
       {E("rewrite-target: invalid value \"/$3\": refers to $3 but path \"/api(/|$)(.*)\" has 2 "
          "capture groups")},
       regex_paths()},
      {"rewrite-target group without use-regex",
       A({{"rewrite-target", "/$1"}}),
       {},
       {E("refers to $1 but path \"/\" is not a regex")}},
      {"rewrite-target group with an Exact path among regexes",
       A({{"rewrite-target", "/$1"}}),
       {},
       {E("path \"/exact\" is not a regex")},
       AnnotationContext{"default", "web", {{"/(.*)", true}, {"/exact", false}}}},
      {"rewrite-target group on an Ingress without paths",
       A({{"rewrite-target", "/$1"}}),
       {},
       {E("the Ingress has no regex path")},
       AnnotationContext{"default", "web", {}}},
      {"rewrite-target skips paths RE2 rejects (the translator reports them)",
       A({{"rewrite-target", "/$1"}}),
       [](IngressPolicy& p) { p.route.mut().rewrite_target = "/$1"; },
       {},
       AnnotationContext{"default", "web", {{"/(a", true}, {"/(b)", true}}}},
      {"rewrite-target with another variable",
       A({{"rewrite-target", "/$host"}}),
       {},
       {E("'$' at offset 1 is not followed by a group number 1-9")}},
      {"app-root", A({{"app-root", "/app1"}}),
       [](IngressPolicy& p) { p.route.mut().app_root = "/app1"; }},
      {"app-root relative",
       A({{"app-root", "app1"}}),
       {},
       {E("app-root: invalid value \"app1\": app-root must start with '/'")}},
      {"permanent-redirect with its default code",
       A({{"permanent-redirect", "https://example.com/new"}}),
       [](IngressPolicy& p) {
         p.route.mut().redirect = model::Redirect{"https://example.com/new", 301};
       }},
      {"permanent-redirect-code 308",
       A({{"permanent-redirect", "https://example.com"}, {"permanent-redirect-code", "308"}}),
       [](IngressPolicy& p) {
         p.route.mut().redirect = model::Redirect{"https://example.com", 308};
       }},
      {"temporal-redirect with its code",
       A({{"temporal-redirect", "/maintenance"}, {"temporal-redirect-code", "307"}}),
       [](IngressPolicy& p) {
         p.route.mut().redirect = model::Redirect{"/maintenance", 307};
       }},
      {"temporal-redirect wins over permanent-redirect",
       A({{"permanent-redirect", "https://a.example"}, {"temporal-redirect", "https://b.example"}}),
       [](IngressPolicy& p) {
         p.route.mut().redirect = model::Redirect{"https://b.example", 302};
       },
       {W("tidegate.io/permanent-redirect and tidegate.io/temporal-redirect are both set; "
          "tidegate.io/temporal-redirect wins")}},
      {"invalid redirect code keeps the redirect with the default code",
       A({{"permanent-redirect", "https://a.example"}, {"permanent-redirect-code", "200"}}),
       [](IngressPolicy& p) {
         p.route.mut().redirect = model::Redirect{"https://a.example", 301};
       },
       {E("permanent-redirect-code: invalid value \"200\": expected 301, 302, 303, 307 or 308; "
          "ignored (301 applies)")}},
      {"invalid redirect URLs",
       A({{"permanent-redirect", "javascript:alert(1)"}, {"temporal-redirect", "https://x/\"a"}}),
       {},
       {E("permanent-redirect: invalid value \"javascript:alert(1)\": must be an http:// or "
          "https:// URL"),
        E("temporal-redirect: invalid value \"https://x/\"a\": may not hold")}},
      {"invalid temporal-redirect-code",
       A({{"temporal-redirect", "/x"}, {"temporal-redirect-code", "301x"}}),
       [](IngressPolicy& p) {
         p.route.mut().redirect = model::Redirect{"/x", 302};
       },
       {E("temporal-redirect-code: invalid value \"301x\": expected 301, 302, 303, 307 or 308; "
          "ignored (302 applies)")}},
      {"redirect codes without redirects",
       A({{"permanent-redirect-code", "308"}, {"temporal-redirect-code", "307"}}),
       {},
       {W("permanent-redirect-code: has no effect without permanent-redirect"),
        W("temporal-redirect-code: has no effect without temporal-redirect")}},
      {"app-root with a redirect",
       A({{"app-root", "/app"}, {"temporal-redirect", "/x"}}),
       [](IngressPolicy& p) {
         p.route.mut().app_root = "/app";
         p.route.mut().redirect = model::Redirect{"/x", 302};
       },
       {W("app-root has no effect")}},
  };
}

TEST(AnnotationsRewrites, Table) {
  for (const auto& c : rewrites_cases()) run(c);
}

}  // namespace tidegate::controller::translate::annotation_table
