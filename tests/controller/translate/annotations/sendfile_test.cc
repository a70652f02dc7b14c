// Annotation table cases of the X-Sendfile family (x-sendfile-directories, x-accel-mapping):
// controller/translate/annotations/sendfile.cc. Shared parts: table.h.

#include "table.h"

namespace tidegate::controller::translate::annotation_table {

std::vector<Case> sendfile_cases() {
  return {
      {"directories, comma or space separated, duplicates once",
       A({{"x-sendfile-directories", "/srv/app/storage, /srv/media /srv/media"}}),
       [](IngressPolicy& p) {
         model::Sendfile s;
         s.directories = {"/srv/app/storage", "/srv/media"};
         p.route.mut().sendfile = s;
       }},
      {"mappings, longest prefix first, a trailing slash on the directory dropped",
       A({{"x-sendfile-directories", "/srv/files"},
          {"x-accel-mapping", "/p/=/srv/files/, /p/private/=/srv/files/private"}}),
       [](IngressPolicy& p) {
         model::Sendfile s;
         s.directories = {"/srv/files"};
         s.mappings = {{"/p/private/", "/srv/files/private"}, {"/p/", "/srv/files"}};
         p.route.mut().sendfile = s;
       }},
      {"a relative directory turns the feature off",
       A({{"x-sendfile-directories", "/srv/files, uploads"}}),
       {},
       {E("x-sendfile-directories: invalid value \"/srv/files, uploads\": \"uploads\" must be an "
          "absolute path; X-Sendfile stays off")}},
      {"the root directory is refused",
       A({{"x-sendfile-directories", "/"}}),
       {},
       {E("\"/\" must not be the root directory")}},
      {"\"..\" is refused",
       A({{"x-sendfile-directories", "/srv/files/../etc"}}),
       {},
       {E("must not contain \".\" or \"..\" components")}},
      {"an empty list", A({{"x-sendfile-directories", " , "}}), {}, {E("no directory given")}},
      {"a mapping outside the directories: read as paths",
       A({{"x-sendfile-directories", "/srv/files"}, {"x-accel-mapping", "/p/=/opt/other"}}),
       [](IngressPolicy& p) {
         model::Sendfile s;
         s.directories = {"/srv/files"};
         p.route.mut().sendfile = s;
       },
       {E("x-accel-mapping: invalid value \"/p/=/opt/other\": x-accel-mapping directory "
          "\"/opt/other\" is not within the x-sendfile directories; X-Accel-Redirect values are "
          "read as file "
          "paths")}},
      {"a mapping without '='",
       A({{"x-sendfile-directories", "/srv/files"}, {"x-accel-mapping", "/p/"}}),
       [](IngressPolicy& p) {
         model::Sendfile s;
         s.directories = {"/srv/files"};
         p.route.mut().sendfile = s;
       },
       {E("expected \"/uri-prefix/=/directory\" entries")}},
      {"a mapping prefix must end with '/'",
       A({{"x-sendfile-directories", "/srv/files"}, {"x-accel-mapping", "/p=/srv/files"}}),
       [](IngressPolicy& p) {
         model::Sendfile s;
         s.directories = {"/srv/files"};
         p.route.mut().sendfile = s;
       },
       {E("must start and end with '/'")}},
      {"a mapping alone does nothing",
       A({{"x-accel-mapping", "/p/=/srv/files"}}),
       {},
       {W("x-accel-mapping: has no effect without x-sendfile-directories")}},
  };
}

TEST(AnnotationsSendfile, Table) {
  for (const auto& c : sendfile_cases()) run(c);
}

}  // namespace tidegate::controller::translate::annotation_table
