#pragma once
// The migration check (tidegate-controller --check-nginx-annotations): for each Ingress, each
// nginx.ingress.kubernetes.io/ annotation as Tidegate would take it behind --nginx-annotations:
// supported, supported with a difference (how), supported but with a value Tidegate refuses
// (why), not supported, or nginx configuration text that is never interpreted. A pure function
// of the Ingresses, so that a user can run it on a folder of manifests or on a cluster before
// switching (docs/annotations.md, "Migrating from ingress-nginx").

#include <string>
#include <vector>

#include "objects/objects.h"

namespace tidegate::controller::migrate {

enum class Support { kSupported, kPartly, kInvalid, kUnsupported, kNeverInterpreted };
const char* to_string(Support s);  // "supported", "partly", "invalid", "unsupported", "refused"

struct AnnotationCheck {
  std::string annotation;  // the full key
  Support support = Support::kSupported;
  std::string detail;  // how it differs, why the value is refused, or what happens instead
  bool operator==(const AnnotationCheck&) const = default;
};

struct IngressCheck {
  std::string ingress;                       // "namespace/name"
  std::vector<AnnotationCheck> annotations;  // nginx annotations only, in key order
  bool operator==(const IngressCheck&) const = default;
};

// Ingresses without nginx annotations are left out.
std::vector<IngressCheck> check_nginx_annotations(const std::vector<objects::Ingress>& ingresses);

// Lines for a terminal: per Ingress, one line per annotation, then a count per verdict.
std::string format_report(const std::vector<IngressCheck>& checks);

}  // namespace tidegate::controller::migrate
