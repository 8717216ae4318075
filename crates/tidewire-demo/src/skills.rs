//! The demo's skills (the skills extension): `pdf-processing`, with a reference file in a
//! subfolder, and `refunds` under the longer path `acme/billing/refunds`. The conformance
//! suite's skills scenarios read the first one (it needs a folder at the skill's root).

use tidewire_server::ServerBuilder;
use tidewire_server::skill::{Skill, SkillError, SkillSet};

/// The `SKILL.md` of `pdf-processing`.
pub const PDF_SKILL_MD: &str = "---\nname: pdf-processing\ndescription: Extract, fill, and assemble PDF documents\nlicense: Apache-2.0\nmetadata:\n  version: \"2.1.0\"\n---\n\n# PDF processing\n\nUse the field reference in `references/FORMS.md` when filling a form.\n";

/// Its reference file, `references/FORMS.md`.
pub const PDF_FORMS_MD: &str =
    "# PDF form fields\n\nText fields, checkboxes and signature fields.\n";

/// The `SKILL.md` of `refunds`.
pub const REFUNDS_SKILL_MD: &str = "---\nname: refunds\ndescription: Process customer refund requests per company policy\n---\n\n# Refunds\n\nCheck the order date before issuing a refund.\n";

/// The demo's skill set.
///
/// # Errors
/// Never, for these texts; the type says what building a skill can refuse.
pub fn demo_skills() -> Result<SkillSet, SkillError> {
    let pdf = Skill::new("pdf-processing", PDF_SKILL_MD)?
        .with_file("references/FORMS.md", PDF_FORMS_MD)?;
    let refunds = Skill::new("acme/billing/refunds", REFUNDS_SKILL_MD)?;
    SkillSet::new().with(pdf)?.with(refunds)
}

/// Adds the demo skills. The texts are constants the tests check, so building them does not
/// fail; if an edit broke one, the demo says so and serves everything else.
pub(crate) fn register(builder: ServerBuilder) -> ServerBuilder {
    match demo_skills() {
        Ok(skills) => builder.skills(skills),
        Err(error) => {
            eprintln!("tidewire-demo: the demo skills are not offered: {error}");
            builder
        }
    }
}
