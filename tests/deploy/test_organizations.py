"""Targets from AWS Organizations (moto): an OU's accounts are registered at every tick, and one that
leaves the OU is deregistered; the block is checked at push like any target."""

from __future__ import annotations

import json

import boto3
import pytest

from hyperpod_scheduler.deploy import config_store
from hyperpod_scheduler.deploy.fleet_config import parse_fleet_yaml
from hyperpod_scheduler.deploy.handlers import orchestrator
from hyperpod_scheduler.deploy.templates import load_template
from hyperpod_scheduler.errors import UsageError
from tests.deploy.conftest import TABLE, FleetWorld, drain
from tests.deploy.iam import Template, allowed
from tests.store.dynamodb_mock import REGION


def _organization() -> tuple[str, str, list[str]]:
    org = boto3.client("organizations", region_name=REGION)
    org.create_organization(FeatureSet="ALL")
    root = org.list_roots()["Roots"][0]["Id"]
    ou = org.create_organizational_unit(ParentId=root, Name="gpu")["OrganizationalUnit"]["Id"]
    nested = org.create_organizational_unit(ParentId=ou, Name="research")["OrganizationalUnit"]["Id"]
    accounts = []
    for i, parent in enumerate([ou, ou, nested]):
        status = org.create_account(AccountName=f"a{i}", Email=f"a{i}@example.com")["CreateAccountStatus"]
        account = status["AccountId"]
        org.move_account(AccountId=account, SourceParentId=root, DestinationParentId=parent)
        accounts.append(account)
    return root, ou, accounts


def _config(ou: str, extra: str = "") -> str:
    return (
        "schedules: {office: 'Mon-Fri 08:00-18:00 UTC'}\ndefaults: {schedule: office}\n"
        f"organization: {{parents: [{ou}], regions: [us-east-1, eu-west-1]{extra}}}\n"
    )


def test_an_ous_accounts_are_targets_and_one_that_leaves_is_not(world: FleetWorld) -> None:
    root, ou, accounts = _organization()
    config_store.write_text(config_store.Location("dynamodb", TABLE), _config(ou))
    runtime = world.runtime()
    assert orchestrator({}, None, runtime)["parts"] == 6  # three accounts (one in a nested OU) x two regions
    jobs = [json.loads(r["body"]) for r in drain(world.queue_url)]
    assert {(j["account"], j["region"]) for j in jobs} == {(a, r) for a in accounts for r in ("us-east-1", "eu-west-1")}
    assert all(j["config"]["targets"][0]["tag_selector"] for j in jobs)  # the default: govern tagged clusters
    assert {j["role_arn"] for j in jobs} == {f"arn:aws:iam::{a}:role/hyperpod-scheduler-spoke" for a in accounts}
    # An account moved out of the OU is deregistered at the next tick (its records stay).
    boto3.client("organizations", region_name=REGION).move_account(
        AccountId=accounts[0], SourceParentId=ou, DestinationParentId=root
    )
    world.advance(60)
    assert orchestrator({}, None, runtime)["parts"] == 4
    assert accounts[0] not in {json.loads(r["body"])["account"] for r in drain(world.queue_url)}


def test_an_explicit_target_wins_and_excluded_accounts_are_left_alone(world: FleetWorld) -> None:
    _, ou, accounts = _organization()
    explicit = f"targets: [{{account: '{accounts[1]}', region: us-east-1, clusters: [train]}}]\n"
    config_store.write_text(
        config_store.Location("dynamodb", TABLE), _config(ou, f", exclude_accounts: ['{accounts[2]}']") + explicit
    )
    orchestrator({}, None, world.runtime())
    jobs = [json.loads(r["body"]) for r in drain(world.queue_url)]
    places = sorted((j["account"], j["region"]) for j in jobs)
    assert places == sorted([(accounts[0], "us-east-1"), (accounts[0], "eu-west-1"), (accounts[1], "us-east-1"),
                             (accounts[1], "eu-west-1")])  # fmt: skip
    (mine,) = [j for j in jobs if (j["account"], j["region"]) == (accounts[1], "us-east-1")]
    assert [c["name"] for c in mine["config"]["targets"][0]["clusters"]] == ["train"]


@pytest.mark.parametrize(
    ("block", "message"),
    [
        ("{parents: [ou-x], regions: [us-east-1]}", "organization.parents: Value error, 'ou-x' is not an OU id"),
        ("{parents: [r-abcd], regions: []}", "organization.regions"),
        ("{parents: [r-abcd], regions: [us-east-1], target: {role_arn: x}}", "organization.target.role_arn: set per"),
        ("{parents: [r-abcd], regions: [us-east-1], target: {schedule: nope}}", "nope"),
    ],
)
def test_a_bad_organization_block_is_refused_at_push(block: str, message: str) -> None:
    text = f"schedules: {{office: 'Mon-Fri 08:00-18:00 UTC'}}\norganization: {block}\n"
    with pytest.raises(UsageError) as err:
        parse_fleet_yaml(text)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_the_orchestrator_may_list_ous_only_with_using_aws_organizations() -> None:
    params = {"CodeBucket": "artefacts", "CodeKey": "hyperpod-scheduler/lambda-0123456789abcdef.zip"}
    ou = "arn:aws:organizations::111111111111:ou/o-abcdefghij/ou-ab12-cdefgh34"
    on = Template(load_template("hub"), {**params, "UsingAWSOrganizations": "Yes"}).role_statements("OrchestratorRole")
    assert allowed(on, "organizations:ListAccountsForParent", ou)
    assert allowed(on, "organizations:ListOrganizationalUnitsForParent", ou)
    assert not allowed(on, "organizations:CreateAccount", ou)
    off = Template(load_template("hub"), params).role_statements("OrchestratorRole")
    assert not allowed(off, "organizations:ListAccountsForParent", ou)
