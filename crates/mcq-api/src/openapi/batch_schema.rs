//! The exact schema of `POST /v1/batches`: either a list of jobs or a
//! sweep over a base spec, never a mixture, and a sweep's fields and value
//! types spelled out from the spec's own schema. The derive cannot say
//! "one of two shapes", so the document is rewritten here from the
//! derived parts, which keeps every bound written once on its type.

use utoipa::openapi::schema::{
    AdditionalProperties, ArrayBuilder, Object, ObjectBuilder, OneOfBuilder, Schema, Type,
};
use utoipa::openapi::{OpenApi, Ref, RefOr};

/// Replaces the derived `BatchRequest` schema by a `oneOf` of its two
/// shapes. Leaves the document as it is if the derived parts are not
/// where they are expected (the schema test then fails).
pub(super) fn rewrite(doc: &mut OpenApi) {
    let Some(components) = doc.components.as_mut() else {
        return;
    };
    let Some(RefOr::T(Schema::Object(spec))) = components.schemas.get("Spec") else {
        return;
    };
    let sweep = sweep_schema(spec);
    let Some(RefOr::T(Schema::Object(derived))) = components.schemas.get("BatchRequest") else {
        return;
    };
    let property = |name: &str| derived.properties.get(name).cloned();
    let (Some(label), Some(priority), Some(jobs), Some(seed)) = (
        property("label"),
        property("priority"),
        property("jobs"),
        property("seed"),
    ) else {
        return;
    };
    // Given, these are never `null` (the server refuses it): not the
    // nullable schemas the derive writes for optional fields.
    let base = Ref::from_schema_name("Spec");
    let repeat = ObjectBuilder::new()
        .schema_type(Type::Integer)
        .minimum(Some(1))
        .maximum(Some(u32::MAX))
        .description(Some(
            "Jobs per grid point (default 1), one after the other, each with its own seed \
             (drawn, or derived from the batch's base `seed`)",
        ));
    let RefOr::T(Schema::Array(listed)) = &jobs else {
        return;
    };
    // Beside a sweep, `jobs` may only be an empty list.
    let mut none = listed.clone();
    none.min_items = None;
    none.max_items = Some(0);
    let closed =
        || ObjectBuilder::new().additional_properties(Some(AdditionalProperties::FreeForm(false)));
    let of_jobs = closed()
        .description(Some("A batch of the jobs listed."))
        .property("label", label.clone())
        .property("priority", priority.clone())
        .property("seed", seed.clone())
        .property("jobs", jobs)
        .required("jobs");
    let of_sweep = closed()
        .description(Some(
            "A sweep: one job per point of the grid (times `repeat`), over the base `spec`.",
        ))
        .property("label", label)
        .property("priority", priority)
        .property("seed", seed)
        .property("jobs", Schema::Array(none))
        .property("spec", base)
        .property("sweep", sweep)
        .property("repeat", repeat)
        .required("sweep");
    let description = derived.description.clone();
    let request = OneOfBuilder::new()
        .description(description)
        .item(of_jobs)
        .item(of_sweep);
    components.schemas.insert(
        "BatchRequest".into(),
        RefOr::T(Schema::OneOf(request.build())),
    );
}

/// A sweep: at least one spec field, each with a non-empty list of values
/// of that field's schema.
fn sweep_schema(spec: &Object) -> Schema {
    let mut sweep = ObjectBuilder::new()
        .description(Some(
            "Spec fields and the values each takes, e.g. {\"exercise\": [25, 30, 35], \
             \"periods\": [10, 20]}; the jobs are the cartesian product, the last field \
             varying fastest. Each value is listed once.",
        ))
        .min_properties(Some(1))
        .additional_properties(Some(AdditionalProperties::FreeForm(false)));
    for (field, schema) in &spec.properties {
        let values = ArrayBuilder::new().items(schema.clone()).min_items(Some(1));
        sweep = sweep.property(field, values);
    }
    Schema::Object(sweep.build())
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    fn batch_request() -> Value {
        let doc = serde_json::to_value(super::super::openapi()).unwrap();
        doc["components"]["schemas"]["BatchRequest"].clone()
    }

    #[test]
    fn a_batch_is_its_jobs_or_a_sweep() {
        let schema = batch_request();
        let shapes = schema["oneOf"].as_array().expect("oneOf");
        assert_eq!(shapes.len(), 2, "{schema:#}");
        let (jobs, sweep) = (&shapes[0], &shapes[1]);
        assert_eq!(jobs["required"], json!(["jobs"]));
        assert_eq!(jobs["additionalProperties"], false);
        assert_eq!(jobs["properties"]["jobs"]["minItems"], 1);
        assert!(jobs["properties"].get("sweep").is_none());
        assert_eq!(sweep["required"], json!(["sweep"]));
        assert_eq!(sweep["additionalProperties"], false);
        assert_eq!(sweep["properties"]["jobs"]["maxItems"], 0);
        assert_eq!(sweep["properties"]["repeat"]["minimum"], 1);
        for shape in [jobs, sweep] {
            let seed = &shape["properties"]["seed"];
            assert_eq!(seed["maximum"], mcq_kernel::MAX_SEED, "{seed}");
        }
    }

    #[test]
    fn a_sweep_lists_every_spec_field_with_its_type() {
        let schema = batch_request();
        let sweep = &schema["oneOf"][1]["properties"]["sweep"];
        assert_eq!(sweep["minProperties"], 1);
        assert_eq!(sweep["additionalProperties"], false);
        let fields = sweep["properties"].as_object().unwrap();
        assert!(fields.contains_key("exercise") && fields.contains_key("greeks"));
        assert_eq!(fields["periods"]["type"], "array");
        assert_eq!(fields["periods"]["minItems"], 1);
        assert_eq!(fields["periods"]["items"]["maximum"], 1000);
    }
}
